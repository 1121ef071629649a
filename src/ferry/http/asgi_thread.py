"""An ASGI app served by uvicorn on a thread of this process, on a socket bound first.

The socket is bound before the server starts, so a taken port fails at once with the address
in the error, and port 0 has its real number to print. uvicorn's own logging is left off: no
access log (nothing about a request, its headers least of all, is printed). `ferry run`'s
control API and the lease signals its tasks on other machines ask are both served this way.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from ferry.errors import FerryError

__all__ = ["AsgiThread"]

START_TIMEOUT_SECONDS = 30.0


class AsgiThread:
    """`app` served on `host`:`port` (0: a free port) by a daemon thread named `name`.
    `purpose` names the server in errors ("the API")."""

    def __init__(
        self,
        app: Any,
        host: str,
        port: int,
        *,
        name: str,
        purpose: str,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
    ) -> None:
        import uvicorn

        self._purpose = purpose
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((host, port))
        except OSError as exc:
            self._socket.close()
            raise FerryError(f"{purpose} cannot listen on {host}:{port}: {exc.strerror}") from None
        self.port = int(self._socket.getsockname()[1])
        self.scheme = "https" if ssl_certfile else "http"
        settings = uvicorn.Config(
            app,
            log_config=None,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=2,  # a client's idle keep-alive must not hold up a stop
            ssl_certfile=ssl_certfile,
            ssl_keyfile=ssl_keyfile,
        )
        self._server = uvicorn.Server(settings)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name=name, daemon=True
        )

    def url(self, host: str) -> str:
        """Where clients reach it, by `host` (the address they know this machine by)."""
        shown = f"[{host}]" if ":" in host else host  # an IPv6 literal
        return f"{self.scheme}://{shown}:{self.port}"

    def start(self, why_not: str = "") -> None:
        """Serve; returns once uvicorn accepts requests. `why_not`: the likely cause, said if
        it does not start within START_TIMEOUT_SECONDS."""
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                hint = f" ({why_not})" if why_not else ""
                raise FerryError(f"{self._purpose} on port {self.port} did not start{hint}")
            time.sleep(0.02)

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(10)
        self._socket.close()
