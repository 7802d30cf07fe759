"""Running the web app on uvicorn until SIGINT or SIGTERM, on a socket bound before it starts
(so ``--port 0`` can say which port it got).

uvicorn bounds the headers' size and the idle time between requests, but not how long a client
may take to send its headers: one that trickles a byte now and then would hold its connection
open for as long as it likes (slowloris). ``HeaderTimeoutProtocol`` gives every request
``header_timeout_s`` from the connection's start (or the previous response's end) to finish its
headers, then answers 408 and closes the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable, Iterator
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from slidewin.client.serve.app import create_app
from slidewin.db.signals import Stop, handling

GRACE_S = 1  # open event streams get this long to end once a stop is asked for
HEADER_TIMEOUT_S = 10.0  # a request's headers must have arrived this long after it may start
_SLOW = b"the request's headers came too slowly; the connection is closed\n"
TIMED_OUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
             b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(_SLOW), _SLOW))


class HeaderTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request headers are not complete
    ``header_timeout_s`` after it opened or after its previous response ended."""

    header_timeout_s = HEADER_TIMEOUT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the headers are in (or the request failed)
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm()  # the next request on this connection gets the same time

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self.header_timer = self.loop.call_later(self.header_timeout_s, self._timed_out)

    def _disarm(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None

    def _timed_out(self) -> None:
        self.header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            if self.conn.our_state is h11.IDLE:  # nothing sent on this request yet
                self.transport.write(TIMED_OUT)
            self.transport.close()


def protocol_with(header_timeout_s: float) -> type[HeaderTimeoutProtocol]:
    """``HeaderTimeoutProtocol`` with its limit set (uvicorn makes the protocol from a class)."""
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,),
                {"header_timeout_s": header_timeout_s})


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
          min_interval: float = 1.0, pool_size: int = 8,
          header_timeout_s: float = HEADER_TIMEOUT_S) -> Stop:
    """Serve the store at ``dsn`` until a signal; returns the stop flag (which signal). A
    client that has not sent a request's headers within ``header_timeout_s`` is dropped."""
    app = create_app(dsn, pool_size=pool_size, min_interval=min_interval)
    sock = bind(host, port)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            timeout_graceful_shutdown=GRACE_S, ws="none",
                            http=protocol_with(header_timeout_s))
    stop = Stop()
    server = _Server(config, stop, app.state.hub.stopping)
    on_ready(url_of(sock))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return stop
