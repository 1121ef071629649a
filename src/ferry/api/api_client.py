"""The CLI's side of the API (`ferry topics`, `ferry flows`): find the running ferry, call it.

The address comes from `<ferry.state.dir>/api.json`, which `ferry run --api-port` writes while
it serves (or `--url`); the token from the same place `ferry run` takes it (FERRY_API_TOKEN or
`api.token.file`). Over HTTPS the server's certificate is trusted if a system CA signed it or
if it is `api.ssl.certfile` itself (a self-signed one).
"""

from __future__ import annotations

import json
import ssl
from typing import Any

import httpx

from ferry.api.auth import load_token
from ferry.api.server import address_file
from ferry.config.model import FerryConfig
from ferry.errors import FerryError

__all__ = ["ApiClient"]


class ApiClient:
    def __init__(self, url: str, token: str | None, *, verify: ssl.SSLContext | bool = True):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = url
        self._http = httpx.Client(base_url=url, headers=headers, verify=verify, timeout=60)

    @classmethod
    def of(cls, config: FerryConfig, url: str | None = None) -> ApiClient:
        if url is None:
            path = address_file(config)
            try:
                url = str(json.loads(path.read_text())["url"])
            except (OSError, ValueError, KeyError):
                raise FerryError(
                    f"no running ferry API found ({path} is missing or unreadable): start "
                    f"`ferry run -c {config.path} --api-port 0` on this machine, or give --url"
                ) from None
        verify: ssl.SSLContext | bool = True
        if config.api.ssl_certfile is not None:
            verify = ssl.create_default_context()
            verify.load_verify_locations(str(config.api.ssl_certfile))
        return cls(url, load_token(config), verify=verify)

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        try:
            response = self._http.request(method, f"/api/v1{path}", json=body)
        except httpx.HTTPError as exc:
            raise FerryError(f"ferry's API at {self.url} did not answer: {exc}") from None
        if response.is_success:
            return response.json()
        try:
            detail = response.json().get("detail", response.text)
        except ValueError:
            detail = response.text
        if not isinstance(detail, str):
            detail = json.dumps(detail)
        raise FerryError(f"ferry's API refused ({response.status_code}): {detail}")
