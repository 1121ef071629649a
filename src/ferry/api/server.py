"""Serving the API from `ferry run`: uvicorn in a thread (http/asgi_thread.py), HTTPS when
configured.

Where the API listens is written to `<ferry.state.dir>/api.json` while it serves (removed at
stop): that is how `ferry topics` and `ferry flows` on the same machine find it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ferry.config.model import FerryConfig
from ferry.errors import FerryError
from ferry.http.asgi_thread import AsgiThread

if TYPE_CHECKING:
    from ferry.api.app import Conditions, Restart
    from ferry.api.events import Events
    from ferry.api.sampler import Sampler
    from ferry.api.sync_delay_watch import SyncDelayWatch
    from ferry.control.controller import Controller

__all__ = ["ApiServer", "address_file", "serve"]


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
        self._config = config
        self._sampler = sampler
        self._watch = watch
        certfile, keyfile = config.api.ssl_certfile, config.api.ssl_keyfile
        self._served = AsgiThread(
            app,
            host,
            port,
            name="ferry-api",
            purpose="the API",
            ssl_certfile=str(certfile) if certfile else None,
            ssl_keyfile=str(keyfile) if keyfile else None,
        )
        self.port = self._served.port
        self.scheme = self._served.scheme
        self.url = self._served.url(host)

    def start(self) -> ApiServer:
        if self._sampler is not None:
            self._sampler.start()
        if self._watch is not None:
            self._watch.start()
        try:
            self._served.start("is api.ssl.certfile/keyfile a certificate and its key?")
        except FerryError:
            self.stop()
            raise
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
        self._served.stop()
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
