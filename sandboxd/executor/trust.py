"""The workspace's trust of the daemon's egress CA (issue 25, item 4).

The daemon terminates TLS towards hosts that carry a secret with its own CA
(sandboxd/egress/ca.py). Its certificate (public; the key never leaves the
daemon) comes in ``hello`` as ``trust``; the image's root is read-only, so the
executor writes, as root into its state folder (readable, not writable, by
the sandbox user), the CA alone and a bundle of the image's own trust plus
the CA, and names them in the workload's environment with every variable the
usual TLS stacks read (OpenSSL and Python's ssl, requests, curl, git, pip,
node; wget through a ``WGETRC`` of its own). A sandbox's own env wins over
these (it may point elsewhere).
"""

from __future__ import annotations

import os

#: The image's trust, the first of these that exists (Debian, Fedora, Alpine/BSD).
SYSTEM_BUNDLES = (
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
)
CA_FILE = "egress-ca.pem"
BUNDLE_FILE = "ca-bundle.pem"
#: wget (GnuTLS) reads no variable naming a bundle, only its startup file.
WGETRC_FILE = "wgetrc"
#: Variables naming a whole bundle, and the one (node's) that adds to its own.
BUNDLE_VARIABLES = (
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "PIP_CERT",
)
EXTRA_VARIABLES = ("NODE_EXTRA_CA_CERTS",)


def install(state_dir: str, ca_pem: str) -> dict[str, str]:
    """Write the CA and the combined bundle into ``state_dir``; the environment naming them."""
    if "-----BEGIN CERTIFICATE-----" not in ca_pem or "PRIVATE KEY" in ca_pem:
        raise ValueError("trust must be one PEM certificate")
    system = ""
    for path in SYSTEM_BUNDLES:
        try:
            with open(path, encoding="ascii", errors="replace") as bundle:
                system = bundle.read()
            break
        except OSError:
            continue
    if system and not system.endswith("\n"):
        system += "\n"
    ca_path = os.path.join(state_dir, CA_FILE)
    bundle_path = os.path.join(state_dir, BUNDLE_FILE)
    wgetrc_path = os.path.join(state_dir, WGETRC_FILE)
    _write(ca_path, ca_pem)
    _write(bundle_path, system + ca_pem)
    _write(wgetrc_path, f"ca_certificate = {bundle_path}\n")
    env = dict.fromkeys(BUNDLE_VARIABLES, bundle_path)
    env.update(dict.fromkeys(EXTRA_VARIABLES, ca_path))
    env["WGETRC"] = wgetrc_path
    return env


def _write(path: str, text: str) -> None:
    # A new file renamed into place: a reader never sees half a bundle.
    temporary = f"{path}.{os.getpid()}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(text)
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)
