"""Serving the API (uvicorn in a thread): the address file the CLI finds it by, HTTPS with a
self-signed certificate the CLI's client trusts, a port already taken, the token over a socket.
No broker: the API's flows are a config's, with nothing running."""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import socket
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ferry.api.api_client import ApiClient
from ferry.api.auth import TOKEN_ENV
from ferry.api.server import address_file, serve
from ferry.config import load_config
from ferry.config.model import FerryConfig
from ferry.control.controller import Controller
from ferry.errors import FerryError
from ferry.flows.status import Condition


def _config(tmp_path: Path, more: str = "") -> FerryConfig:
    path = tmp_path / "ferry.properties"
    path.write_text(
        "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"
        f"A->B.enabled = true\nferry.state.dir = {tmp_path / 'state'}\n{more}"
    )
    return load_config(path)


def _self_signed(directory: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    (directory / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def test_https_with_a_token_is_served_found_and_trusted_then_cleaned_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _self_signed(tmp_path)
    (tmp_path / "token").write_text("tok-123\n")
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    config = _config(
        tmp_path, "api.token.file = token\napi.ssl.certfile = cert.pem\napi.ssl.keyfile = key.pem\n"
    )
    server = serve(config, Controller(config, print), dict, "127.0.0.1", 0)
    try:
        recorded = json.loads(address_file(config).read_text())
        assert recorded == {"url": f"https://127.0.0.1:{server.port}", "pid": os.getpid()}
        flows = ApiClient.of(config).call("GET", "/flows")
        assert [f["name"] for f in flows] == ["A->B"]
        with pytest.raises(FerryError, match=r"refused \(401\)"):
            trust = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
            ApiClient(server.url, "wrong", verify=trust).call("GET", "/flows")
    finally:
        server.stop()
    assert not address_file(config).exists()
    with pytest.raises(FerryError, match="no running ferry API found"):
        ApiClient.of(config)


def test_a_taken_port_fails_at_once_and_no_token_off_loopback_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    config = _config(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(FerryError, match=f"cannot listen on 127.0.0.1:{port}"):
            serve(config, Controller(config, print), dict, "127.0.0.1", port)
    with pytest.raises(FerryError, match="no token"):
        serve(config, Controller(config, print), dict, "0.0.0.0", 0)


def test_the_cli_says_how_to_reach_the_api_and_how_to_write_a_flow(tmp_path: Path) -> None:
    from tests.ferry_cli import run_ferry

    config = _config(tmp_path)
    assert config.path is not None
    bad_flow = run_ferry("topics", "add", "-c", str(config.path), "--flow", "AB", "t", timeout=60)
    assert bad_flow.returncode == 1
    assert "--flow 'AB': write it as SOURCE->TARGET" in bad_flow.stderr
    no_api = run_ferry("flows", "pause", "-c", str(config.path), "--flow", "A->B", timeout=60)
    assert no_api.returncode == 1 and "Traceback" not in no_api.stderr
    assert "no running ferry API found" in no_api.stderr


def test_the_cli_restarts_a_failed_flow(tmp_path: Path) -> None:
    """(The refusal of a flow that has not failed is the API's: test_control_api_http.)"""
    from tests.ferry_cli import run_ferry

    config = _config(tmp_path)
    failed = {"A->B": "topic orders on A: not allowed to read"}

    def restart(name: str) -> bool:
        return failed.pop(name, None) is not None

    def conditions() -> dict[str, Condition]:
        return {"A->B": Condition(failed=failed.get("A->B"))}

    server = serve(config, Controller(config, print), conditions, "127.0.0.1", 0, restart=restart)
    try:
        restarted = run_ferry("flows", "restart", "-c", str(config.path), "--flow", "A->B")
        assert restarted.returncode == 0, restarted.stderr
        assert restarted.stdout.strip() == "flow A->B: running"
        assert failed == {}, "the CLI did not reach the restart"
    finally:
        server.stop()
