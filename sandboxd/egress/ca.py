"""The daemon's own certificate authority, for TLS termination towards secret hosts.

Made once (an EC P-256 key and a self-signed CA certificate, ten years) in the
daemon's state directory, the key file 0600; never sent into a sandbox — the
workspace receives the certificate only (``trust_pem``), to trust it. Leaf
certificates are issued per host on demand, short-lived (``LEAF_LIFETIME``)
and cached in memory until close to their end, so a busy host costs one
signature per day, not one per connection.

Only hosts that carry a secret are ever terminated (egress.intercept), so a
sandbox that trusts this CA gains nothing for any other host: the gateway
relays those connections end to end, and their certificate is the real one.
"""

from __future__ import annotations

import datetime
import fcntl
import ipaddress
import os
import ssl
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from sandboxd.backends.shared.settings import EGRESS_CA_CERT

KEY_FILE = "egress-ca.key"
CERT_FILE = EGRESS_CA_CERT
LOCK_FILE = "egress-ca.lock"
CA_LIFETIME = datetime.timedelta(days=3650)
LEAF_LIFETIME = datetime.timedelta(hours=24)
#: A cached leaf is replaced once less than this is left of it.
LEAF_RENEW_BEFORE = datetime.timedelta(hours=1)
#: Clocks inside a sandbox may lag the host's a little.
BACKDATE = datetime.timedelta(minutes=5)
MAX_CACHED_LEAVES = 1024


@dataclass(frozen=True)
class _Leaf:
    context: ssl.SSLContext
    not_after: datetime.datetime


class CertificateAuthority:
    """The CA's key and certificate, and the server contexts of the hosts it signs for."""

    def __init__(self, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> None:
        self._key = key
        self._cert = cert
        self._cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        self._leaves: dict[str, _Leaf] = {}
        self._lock = threading.Lock()
        # Leaves share one key: a fresh key per host buys nothing here (the
        # CA key signs them all) and key generation is the slow part.
        self._leaf_key = ec.generate_private_key(ec.SECP256R1())

    def __repr__(self) -> str:
        return f"CertificateAuthority({self._cert.subject.rfc4514_string()})"

    @classmethod
    def load_or_create(cls, state_dir: Path) -> CertificateAuthority:
        """The CA kept in ``state_dir``, made there the first time (0700 folder, 0600 key).

        Daemons sharing a state folder (tests, replicas on one host) take a
        lock around the look and the make, so they all end with one CA.
        """
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        key_path, cert_path = state_dir / KEY_FILE, state_dir / CERT_FILE
        lock = os.open(state_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if key_path.exists() and cert_path.exists():
                _check_private(key_path)
                key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
                if not isinstance(key, ec.EllipticCurvePrivateKey):
                    raise ValueError(f"{key_path} is not an EC private key")
                return cls(key, x509.load_pem_x509_certificate(cert_path.read_bytes()))
            key = ec.generate_private_key(ec.SECP256R1())
            cert = _self_signed(key)
            _write_private(
                key_path,
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                ),
            )
            # The certificate last: its presence says the pair is whole.
            _write_private(cert_path, cert.public_bytes(serialization.Encoding.PEM))
            return cls(key, cert)
        finally:
            os.close(lock)

    @property
    def cert_pem(self) -> bytes:
        """The CA certificate (public), what a workspace is told to trust."""
        return self._cert_pem

    def server_context(self, host: str) -> ssl.SSLContext:
        """A TLS server context presenting a leaf for ``host`` signed by this CA."""
        now = datetime.datetime.now(datetime.timezone.utc)
        with self._lock:
            leaf = self._leaves.get(host)
            if leaf is not None and leaf.not_after - now > LEAF_RENEW_BEFORE:
                return leaf.context
        context, not_after = self._issue(host, now)
        with self._lock:
            if len(self._leaves) >= MAX_CACHED_LEAVES:
                self._leaves.pop(next(iter(self._leaves)))
            self._leaves[host] = _Leaf(context, not_after)
        return context

    def _issue(self, host: str, now: datetime.datetime) -> tuple[ssl.SSLContext, datetime.datetime]:
        not_after = now + LEAF_LIFETIME
        try:
            alt: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            alt = x509.DNSName(host)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host[:64])]))
            .issuer_name(self._cert.subject)
            .public_key(self._leaf_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE)
            .not_valid_after(not_after)
            .add_extension(x509.SubjectAlternativeName([alt]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
            .sign(self._key, hashes.SHA256())
        )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        # HTTP/1.1 only: the header rewriter speaks nothing else.
        context.set_alpn_protocols(["http/1.1"])
        key_pem = self._leaf_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        chain = cert.public_bytes(serialization.Encoding.PEM) + self._cert_pem
        # load_cert_chain reads files only: a private temporary folder, gone at once.
        with tempfile.TemporaryDirectory(prefix="sandboxd-leaf-") as folder:
            cert_file, key_file = Path(folder) / "cert.pem", Path(folder) / "key.pem"
            cert_file.write_bytes(chain)
            _write_private(key_file, key_pem)
            context.load_cert_chain(cert_file, key_file)
        return context, not_after


def _self_signed(key: ec.EllipticCurvePrivateKey) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "sandboxd"),
            x509.NameAttribute(NameOID.COMMON_NAME, "sandboxd egress CA"),
        ]
    )
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + CA_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )


def _write_private(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(temporary, path)


def _check_private(path: Path) -> None:
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise PermissionError(f"{path} is readable by others (mode {mode:o}); it must be 0600")
