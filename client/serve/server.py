"""Running the web app on uvicorn until SIGINT or SIGTERM, on a socket bound before it starts
(so ``--port 0`` can say which port it got)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator

import uvicorn

from slidewin.client.serve.app import create_app
from slidewin.db.signals import Stop, handling

GRACE_S = 1  # open event streams get this long to end once a stop is asked for


class _Server(uvicorn.Server):
    """uvicorn's server, stopped the way every long-running slidewin command is: the first
    SIGINT or SIGTERM asks for a clean stop (remembered in ``stop``), a second Ctrl-C forces
    it; the previous handlers are back afterwards and no signal is raised again."""

    def __init__(self, config: uvicorn.Config, stop: Stop,
                 on_stop: Callable[[], None] = lambda: None) -> None:
        super().__init__(config)
        self.stop, self.on_stop = stop, on_stop

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        def handler(signum: int, _frame: object) -> None:
            if self.stop.signum is None:
                self.stop.signum = signum
            if self.should_exit:
                self.force_exit = True
            self.should_exit = True
            self.stop.set()
            self.on_stop()

        with handling(handler):
            yield


def bind(host: str, port: int) -> socket.socket:
    """A listening-ready socket on ``host:port`` (port 0: one the system picks)."""
    family, kind, proto, _name, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def serve(dsn: str, host: str, port: int, *, on_ready: Callable[[str], None],
          min_interval: float = 1.0, pool_size: int = 8) -> Stop:
    """Serve the store at ``dsn`` until a signal; returns the stop flag (which signal)."""
    app = create_app(dsn, pool_size=pool_size, min_interval=min_interval)
    sock = bind(host, port)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            timeout_graceful_shutdown=GRACE_S, ws="none")
    stop = Stop()
    server = _Server(config, stop, app.state.hub.stopping)
    on_ready(url_of(sock))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return stop
