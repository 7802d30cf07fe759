"""``slidewin serve --header-timeout``: a client that trickles its request headers (slowloris)
is answered 408 and disconnected once the limit passes; a request whose headers came in time
is not cut, however long its answer streams.

The real ``slidewin serve`` process on 127.0.0.1 and a free port, driven through raw sockets;
every wait is a deadline loop on the socket, never a sleep.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from tests.serve_fixtures import ServedStore

pytestmark = pytest.mark.slow  # each test starts `slidewin serve` in a process of its own

LIMIT_S = 1.0


@pytest.fixture(scope="module")
def served(make_store) -> Iterator[ServedStore]:
    with ServedStore(make_store(2), "--header-timeout", f"{LIMIT_S}s") as server:
        yield server


def _connect(server: ServedStore) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port_number), timeout=5)
    sock.settimeout(0.25)  # each recv waits this long for the server, then we send again
    return sock


def _received(sock: socket.socket) -> bytes | None:
    """What the server sent within the socket's timeout; b"" once it closed; None if nothing."""
    try:
        return sock.recv(65536)
    except TimeoutError:
        return None
    except ConnectionResetError:
        return b""


def test_a_client_trickling_its_headers_is_answered_408_and_disconnected(served):
    sock = _connect(served)
    began = time.monotonic()
    sock.sendall(b"GET /api/v1/health HTTP/1.1\r\n")
    answer = b""
    with sock:
        while time.monotonic() - began < LIMIT_S + 10:
            try:  # a header line four times a second: the server hears from it all along
                sock.sendall(b"X-Trickle: %d\r\n" % int((time.monotonic() - began) * 1000))
            except (BrokenPipeError, ConnectionResetError):
                break
            got = _received(sock)
            if got == b"":
                break
            answer += got or b""
        held = time.monotonic() - began
    assert held < LIMIT_S + 3, f"held for {held:.1f}s with --header-timeout {LIMIT_S}s"
    assert held >= LIMIT_S - 0.05, held
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b"headers came too slowly" in answer


def test_a_silent_connection_is_closed_too(served):
    sock = _connect(served)
    began = time.monotonic()
    with sock:
        while (got := _received(sock)) is None and time.monotonic() - began < LIMIT_S + 10:
            pass
    assert got is not None and got.startswith(b"HTTP/1.1 408 "), got
    assert time.monotonic() - began < LIMIT_S + 3


def test_a_request_in_time_is_answered_and_a_long_answer_is_not_cut(served):
    sock = _connect(served)
    with sock:
        sock.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        first = b""
        deadline = time.monotonic() + 10
        while b"isHealthy" not in first and time.monotonic() < deadline:
            first += _received(sock) or b""
        assert first.startswith(b"HTTP/1.1 200 "), first
        # the same connection, a streamed answer held open past the limit: its headers came
        sock.sendall(b"GET /api/v1/live HTTP/1.1\r\nHost: x\r\n\r\n")
        began, streamed = time.monotonic(), b""
        while time.monotonic() - began < 3 * LIMIT_S:
            got = _received(sock)
            assert got != b"", f"closed after {time.monotonic() - began:.1f}s: {streamed!r}"
            streamed += got or b""
    assert streamed.startswith(b"HTTP/1.1 200 ") and b"event: snapshot" in streamed, streamed
