"""TLS for the egress test hosts (tests/egress_net.py): a test CA, a
certificate it signs for the hosts' names, and a static site served over HTTPS.

The daemon trusts the CA for its own upstream TLS through
``SANDBOXD_EGRESS_UPSTREAM_CA``; a sandbox trusts it the way a user would, from
a file in its workspace named in its environment.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

#: Serves its working folder over HTTPS (``python3 -c SITE ADDRESS PORT CERT KEY LOG``),
#: one JSON line per request in LOG: host, path and Authorization header.
SITE = r"""
import http.server, json, ssl, sys, threading
address, port, cert, key, log = sys.argv[1], int(sys.argv[2]), *sys.argv[3:6]
lock = threading.Lock()
class Handler(http.server.SimpleHTTPRequestHandler):
    def send_head(self):
        with lock, open(log, "a") as out:
            out.write(json.dumps({"host": self.headers.get("host"), "path": self.path,
                                  "auth": self.headers.get("authorization")}) + "\n")
        return super().send_head()
    def log_message(self, *args): pass
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); context.load_cert_chain(cert, key)
server = http.server.ThreadingHTTPServer((address, port), Handler)
# The handshake in each request's thread: one stalled client never holds up accept.
server.socket = context.wrap_socket(server.socket, server_side=True,
                                    do_handshake_on_connect=False)
server.serve_forever()
"""


@dataclass(frozen=True)
class TlsFiles:
    ca: Path  # the CA's certificate: what a client trusts
    cert: Path  # the hosts' certificate
    key: Path  # its key


def make_test_ca(folder: Path, hosts: list[str]) -> TlsFiles:
    """A test CA (valid a day) and a certificate it signs for ``hosts``: PEM files in ``folder``."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sandboxd test hosts CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(h) for h in hosts]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    files = TlsFiles(ca=folder / "ca.pem", cert=folder / "leaf.pem", key=folder / "leaf.key")
    files.cert.write_bytes(leaf.public_bytes(pem))
    files.key.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    files.ca.write_bytes(ca.public_bytes(pem))
    return files


def site_requests(log: Path) -> list[dict[str, str]]:
    """What ``SITE`` (or any server writing the same lines) logged, oldest first."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]
