"""Certificates for the TLS tests, made with openssl in the test set-up."""
from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest


def _openssl(*args: str, cwd: pathlib.Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _ca(name: str, cwd: pathlib.Path) -> None:
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={name}", cwd=cwd)


def _leaf(name: str, ca: str, cwd: pathlib.Path, san: str | None) -> None:
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=cwd)
    extensions = cwd / f"{name}.ext"
    extensions.write_text(f"subjectAltName={san}\n" if san else "extendedKeyUsage=clientAuth\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", str(extensions), cwd=cwd)


@pytest.fixture(scope="session")
def certs(tmp_path_factory) -> pathlib.Path:
    """A CA, a server cert for 127.0.0.1/localhost, a client cert, and a rogue CA with its own client."""
    assert shutil.which("openssl"), "openssl is required for the TLS tests"
    directory = tmp_path_factory.mktemp("certs")
    _ca("ca", directory)
    _ca("rogue-ca", directory)
    _leaf("server", "ca", directory, "IP:127.0.0.1,DNS:localhost")
    _leaf("client", "ca", directory, None)
    _leaf("rogue-client", "rogue-ca", directory, None)
    return directory


def served_and_renewed(certs: pathlib.Path, tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path, pathlib.Path]:
    """(cert, key, renewed): copies of the server's certificate and key for a daemon to serve
    from, and a folder holding a renewal signed by another CA (ca2.pem, server2.pem/.key) to
    put in their place."""
    import shutil

    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    shutil.copy(certs / "server.pem", cert)
    shutil.copy(certs / "server.key", key)
    renewed = tmp_path / "renewed"
    renewed.mkdir()
    _ca("ca2", renewed)
    _leaf("server2", "ca2", renewed, "IP:127.0.0.1,DNS:localhost")
    return cert, key, renewed
