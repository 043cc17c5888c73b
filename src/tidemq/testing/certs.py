"""Throwaway certificate authorities and certificates for TLS tests, made with `openssl`.

`authority(dir, name)` makes a CA; `issue(dir, ca, name)` a certificate it
signs, valid for 127.0.0.1 and localhost (server or client use alike). Two
authorities give the "certificate from an unknown CA" case; `CertSet` makes
the set the TLS tests use.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tidemq.transport.tls import ClientAuth, ServerTls, TlsConfig, TlsMode

__all__ = ["CertSet", "Pair", "authority", "issue"]

_HOSTS = "subjectAltName=IP:127.0.0.1,DNS:localhost"


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


def _openssl(*args: str) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("`openssl` is needed to make test certificates")
    subprocess.run([openssl, *args], check=True, capture_output=True, timeout=60)


def authority(directory: Path, name: str) -> Pair:
    """A self-signed CA certificate and key in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    pair = Pair(directory / f"{name}.crt", directory / f"{name}.key")
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-keyout", str(pair.key), "-out", str(pair.cert), "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    return pair


def issue(directory: Path, ca: Pair, name: str) -> Pair:
    """A certificate for 127.0.0.1/localhost signed by `ca`."""
    pair = Pair(directory / f"{name}.crt", directory / f"{name}.key")
    request = directory / f"{name}.csr"
    extensions = directory / f"{name}.ext"
    extensions.write_text(_HOSTS + "\n", encoding="ascii")
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(pair.key),
        "-out", str(request), "-subj", f"/CN={name}",
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", str(request), "-CA", str(ca.cert), "-CAkey", str(ca.key),
        "-CAcreateserial", "-days", "2", "-out", str(pair.cert), "-extfile", str(extensions),
    )  # fmt: skip
    return pair


class CertSet:
    """A CA with a server and a client certificate; another CA with a stranger's
    (a client certificate the first CA did not sign)."""

    def __init__(self, root: Path) -> None:
        self.ca = authority(root, "ca")
        self.server = issue(root, self.ca, "server")
        self.client = issue(root, self.ca, "client")
        self.other_ca = authority(root, "other-ca")
        self.stranger = issue(root, self.other_ca, "stranger")

    def server_tls(self, mode: TlsMode, verify: ClientAuth = ClientAuth.NONE) -> ServerTls:
        """Serving the server certificate; client certificates checked against the CA."""
        return ServerTls(
            mode, str(self.server.cert), str(self.server.key), str(self.ca.cert), verify
        )

    def client_tls(self, shown: Pair | None = None) -> TlsConfig:
        """A client trusting the CA, showing `shown`'s certificate if given."""
        return TlsConfig(
            ca=str(self.ca.cert),
            cert=str(shown.cert) if shown else None,
            key=str(shown.key) if shown else None,
        )
