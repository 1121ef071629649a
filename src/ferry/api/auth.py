"""The API's bearer token: where it comes from, when the API may run without one, the check.

`FERRY_API_TOKEN` wins over `api.token.file`. Once a token is configured every `/api` call
needs it, from anywhere (loopback too). Without one the API serves only on a loopback address
(127.0.0.1, ::1, localhost), where reaching it already takes an account on the machine; on any
other host it refuses to start. The token is compared in constant time and never printed
(registered with ferry.secrets, so even a message quoting it is masked).
"""

from __future__ import annotations

import hmac
import ipaddress
import os

from ferry import secrets
from ferry.config.model import FerryConfig
from ferry.errors import ConfigError

__all__ = ["TOKEN_ENV", "check_open", "is_loopback", "load_token", "token_matches"]

TOKEN_ENV = "FERRY_API_TOKEN"


def load_token(config: FerryConfig) -> str | None:
    """The configured token, or None; a token file that is missing or empty is an error. A
    token found is masked (`ferry.secrets`) wherever ferry prints from then on."""
    token = _configured_token(config)
    if token is not None:
        secrets.register(token)
    return token


def _configured_token(config: FerryConfig) -> str | None:
    from_env = os.environ.get(TOKEN_ENV, "").strip()
    if from_env:
        return from_env
    path = config.api.token_file
    if path is None:
        return None
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise ConfigError(
            f"cannot read the API token file {path}: {exc.strerror}", key="api.token.file"
        ) from None
    if not token:
        raise ConfigError(f"the API token file {path} is empty", key="api.token.file")
    return token


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_open(host: str, token: str | None) -> None:
    """Refuse to serve without a token anywhere but on a loopback address."""
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"the API would listen on {host} with no token: anyone who reaches it could stop "
            f"replication. Set api.token.file (a file holding a secret) or {TOKEN_ENV}, or "
            "keep --api-host on 127.0.0.1"
        )


def token_matches(given: str, expected: str) -> bool:
    """Constant time: how much of a guess matched must not show in how long the answer took."""
    return hmac.compare_digest(given.encode(), expected.encode())
