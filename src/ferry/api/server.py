"""Serving the API from `ferry run`: uvicorn in a thread, HTTPS when configured.

The socket is bound before the server starts, so a taken port fails `ferry run` at once and
port 0 has its real number to print. Where the API listens is written to
`<ferry.state.dir>/api.json` while it serves (removed at stop): that is how `ferry topics` and
`ferry flows` on the same machine find it. uvicorn's own logging is left off (no access log:
nothing about a request, its headers least of all, is printed).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ferry.config.model import FerryConfig
from ferry.errors import FerryError

if TYPE_CHECKING:
    from ferry.api.app import Conditions, Restart
    from ferry.api.events import Events
    from ferry.api.sampler import Sampler
    from ferry.api.sync_delay_watch import SyncDelayWatch
    from ferry.control.controller import Controller

__all__ = ["ApiServer", "address_file", "serve"]

START_TIMEOUT_SECONDS = 30.0


def address_file(config: FerryConfig) -> Path:
    return config.state_dir / "api.json"


class ApiServer:
    def __init__(
        self,
        app: Any,
        config: FerryConfig,
        *,
        host: str,
        port: int,
        sampler: Sampler | None = None,
        watch: SyncDelayWatch | None = None,
    ) -> None:
        import uvicorn

        self._config = config
        self._sampler = sampler
        self._watch = watch
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((host, port))
        except OSError as exc:
            self._socket.close()
            raise FerryError(f"the API cannot listen on {host}:{port}: {exc.strerror}") from None
        self.port = int(self._socket.getsockname()[1])
        self.scheme = "https" if config.api.ssl_certfile else "http"
        shown = f"[{host}]" if ":" in host else host
        self.url = f"{self.scheme}://{shown}:{self.port}"
        settings = uvicorn.Config(
            app,
            log_config=None,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=2,  # a client's idle keep-alive must not hold up a stop
            ssl_certfile=str(config.api.ssl_certfile) if config.api.ssl_certfile else None,
            ssl_keyfile=str(config.api.ssl_keyfile) if config.api.ssl_keyfile else None,
        )
        self._server = uvicorn.Server(settings)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._socket]},
            name="ferry-api",
            daemon=True,
        )

    def start(self) -> ApiServer:
        if self._sampler is not None:
            self._sampler.start()
        if self._watch is not None:
            self._watch.start()
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise FerryError(
                    f"the API on {self.url} did not start (is api.ssl.certfile/keyfile a "
                    "certificate and its key?)"
                )
            time.sleep(0.05)
        path = address_file(self._config)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written aside and renamed: whoever waits for the file never reads it half written.
        pending = path.with_name(f".{path.name}.{os.getpid()}")
        pending.write_text(json.dumps({"url": self.url, "pid": os.getpid()}))
        os.replace(pending, path)
        return self

    def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.stop()
        if self._watch is not None:
            self._watch.stop()
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(10)
        self._socket.close()
        path = address_file(self._config)
        try:
            if json.loads(path.read_text()).get("pid") == os.getpid():
                path.unlink()
        except (OSError, ValueError):
            pass


def serve(
    config: FerryConfig,
    controller: Controller,
    conditions: Conditions,
    host: str,
    port: int,
    *,
    restart: Restart | None = None,
    events: Events | None = None,
) -> ApiServer:
    """The API and its web console for `ferry run`, serving once this returns; refused
    without a token on a non-loopback host (see auth.py)."""
    from ferry.api.app import create_app
    from ferry.api.auth import check_open, load_token
    from ferry.api.events import Events
    from ferry.api.history import History
    from ferry.api.sampler import Sampler
    from ferry.api.sync_delay_watch import SyncDelayWatch

    token = load_token(config)
    check_open(host, token)
    sampler = Sampler(controller.states, History())
    events = events or Events()
    watch = SyncDelayWatch(config, log=events.add)
    app = create_app(
        controller,
        token=token,
        conditions=conditions,
        restart=restart,
        events=events,
        history=sampler.history,
        alerts=watch.alerts,
    )
    server = ApiServer(app, config, host=host, port=port, sampler=sampler, watch=watch)
    return server.start()
