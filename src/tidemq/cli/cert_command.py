"""`tidemq cert`: a self-signed certificate and key for TLS on every port.

For development only: the name-server and broker ports (`--tls-mode`,
docs/tls.md) and the gRPC endpoint take it alike. Clients must be told to
trust it: our CLI with `--tls-ca <cert>`, our Python client with
`tls=TlsConfig(ca=<cert>)`, the official 5.x clients with
`GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=<cert>`. The certificate
names every --host as a subject alternative name (127.0.0.1 and localhost
by default), which both official clients check. Made with `openssl`.
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
import tempfile
from pathlib import Path

import click

from tidemq.cli.output import emit, fail

CERT_FILE = "server.crt"
KEY_FILE = "server.key"


def subject_alt_names(hosts: tuple[str, ...]) -> str:
    """ "IP:127.0.0.1,DNS:localhost" for openssl's subjectAltName."""
    names = []
    for host in hosts:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            names.append(f"DNS:{host}")
        else:
            names.append(f"IP:{host}")
    return ",".join(names)


@click.command("cert")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("."),
    show_default=True,
    help=f"Directory to write {CERT_FILE} and {KEY_FILE} into.",
)
@click.option(
    "--host",
    "hosts",
    multiple=True,
    default=("127.0.0.1", "localhost"),
    show_default=True,
    help="A host name or IP the certificate is valid for (repeatable).",
)
@click.option("--days", type=click.IntRange(1, 3650), default=30, show_default=True)
@click.option("--force", is_flag=True, help="Overwrite existing files.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def cert(out_dir: Path, hosts: tuple[str, ...], days: int, force: bool, as_json: bool) -> None:
    """Write a self-signed certificate + key for `--tls-cert/--tls-key` (all ports)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise click.ClickException(
            "`openssl` is not installed: it is needed to make the certificate"
        )
    cert_path, key_path = out_dir / CERT_FILE, out_dir / KEY_FILE
    existing = [p for p in (cert_path, key_path) if p.exists()]
    if existing and not force:
        fail(f"{existing[0]} exists; pass --force to overwrite it")
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir) as scratch:
        tmp_cert, tmp_key = Path(scratch) / CERT_FILE, Path(scratch) / KEY_FILE
        done = subprocess.run(
            [
                openssl,
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                str(tmp_key),
                "-out",
                str(tmp_cert),
                "-days",
                str(days),
                "-subj",
                f"/CN={hosts[0]}",
                "-addext",
                f"subjectAltName={subject_alt_names(hosts)}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            fail(f"openssl failed: {done.stderr.strip()[-500:]}")
        tmp_key.chmod(0o600)
        tmp_key.replace(key_path)
        tmp_cert.replace(cert_path)
    emit(
        {"cert": str(cert_path), "key": str(key_path), "hosts": list(hosts), "days": days},
        as_json=as_json,
        title="self-signed certificate written (for development)",
    )
    if not as_json:
        click.echo(
            f"serve with:   tidemq serve --tls-mode enforcing --tls-cert {cert_path} "
            f"--tls-key {key_path}\n"
            f"CLI:          tidemq ... --tls-ca {cert_path}\n"
            f'Python:       tls=TlsConfig(ca="{cert_path}")\n'
            f"gRPC clients: GRPC_DEFAULT_SSL_ROOTS_FILE_PATH={cert_path}"
        )
