"""Live updates over server-sent events, driven by the store's change signals.

One ``Hub`` per server process holds ONE database connection that LISTENs -- on the rollups'
channel (the built-in stream's commits, what ``windows --follow`` waits on), the declared
streams' (payload: the stream), the joins' and the dead letters' -- however many browsers are
connected. Browsers looking at the same view (stream, measure, window kind and size, range)
share a ``Topic``: after a signal for its stream, or every ``idle_s`` when none comes (ages grow
while nothing is written), the topic reads the dashboard once (``client.serve.dashboard``), at
most once per ``min_interval``, and sends every browser of it the same update: the rows of each
series that are new or changed, the x of those that went, and the tables that changed.

Resume: each update carries an id ``<boot>.<topic>.<seq>``; a browser that reconnects sends the
last one it applied (``Last-Event-ID``, which EventSource does by itself) and gets the updates it
missed, replayed from the topic's last ``keep``; when they are gone, or the server restarted, it
gets a fresh snapshot instead. A browser that cannot keep up (its queue full) is disconnected
and resumes the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

from slidewin.client.serve.dashboard import View
from slidewin.client.serve.jsonout import dumps
from slidewin.db.changes import CHANNEL, STREAMS_CHANNEL
from slidewin.db.streams import BUILTIN

JOINS_CHANNEL = "slidewin_joins"
DEAD_LETTERS_CHANNEL = "slidewin_dead_letters"
CHANNELS = (CHANNEL, STREAMS_CHANNEL, JOINS_CHANNEL, DEAD_LETTERS_CHANNEL)
LISTEN_APPLICATION = "slidewin serve (listen)"
KEEPALIVE_S = 15.0
QUEUE = 64  # updates a browser may be behind before it is disconnected (it then resumes)

log = logging.getLogger(__name__)

Reader = Callable[[View], dict[str, Any]]


def frame(event_id: str, kind: str, data: str) -> str:
    """One server-sent event."""
    return f"id: {event_id}\nevent: {kind}\ndata: {data}\n\n"


@dataclass(eq=False)
class Subscriber:
    queue: asyncio.Queue[str | None] = field(default_factory=lambda: asyncio.Queue(QUEUE))


class Topic:
    """The browsers of one view, the view's last reading, and its recent updates."""

    def __init__(self, hub: Hub, view: View, number: int) -> None:
        self.hub, self.view, self.number = hub, view, number
        self.seq = 0
        self.ring: deque[tuple[int, str]] = deque(maxlen=hub.keep)
        self.series: dict[str, dict[float, list[Any]]] = {}
        self.start: dict[str, float] = {}
        self.parts: dict[str, Any] = {}
        self.part_text: dict[str, str] = {}
        self.lag: deque[list[Any]] = deque()
        self.at = 0.0
        self.subscribers: set[Subscriber] = set()
        self.dirty = asyncio.Event()
        self.dirty.set()
        self.ready = asyncio.Event()
        self.failure: Exception | None = None
        self.idle_since = time.monotonic()
        self.task = asyncio.create_task(self.run(), name=f"slidewin-topic-{number}")

    def event_id(self, seq: int) -> str:
        return f"{self.hub.boot}.{self.number}.{seq}"

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.dirty.wait(), timeout=self.hub.idle_s)
            if not self.subscribers and time.monotonic() - self.idle_since > self.hub.linger_s:
                self.hub.forget(self)
                return
            self.dirty.clear()
            began = loop.time()
            try:
                reading = await asyncio.to_thread(self.hub.read, self.view)
            except Exception as exc:  # the store went away, or the view names no stream now
                self.failure = exc
                if self.seq:
                    self._publish({"set": {"problem": _problem(exc)}})
            else:
                self.failure = None
                self._apply(reading)
            self.ready.set()
            await asyncio.sleep(max(0.0, self.hub.min_interval - (loop.time() - began)))

    def _apply(self, reading: dict[str, Any]) -> None:
        self.at = reading["at"]
        self.lag.append(reading["samples"]["lag"])
        first = reading["start"]["ingest"]
        while self.lag and self.lag[0][0] < first:
            self.lag.popleft()
        series = {**reading["series"], "lag": list(self.lag)}
        start = {**reading["start"], "lag": first}
        parts = {**reading["parts"], "problem": None}
        new = {name: {row[0]: row for row in rows} for name, rows in series.items()}
        texts = {name: json.dumps(value, sort_keys=True, default=str)
                 for name, value in parts.items()}
        if self.seq == 0:
            self.series, self.start, self.parts, self.part_text = new, start, parts, texts
            self.seq = 1
            return
        upsert = {name: [row for x, row in rows.items() if self.series.get(name, {}).get(x) != row]
                  for name, rows in new.items()}
        remove = {name: [x for x in old if x not in new.get(name, {}) and x >= start[name]]
                  for name, old in self.series.items()}
        changed = {name: parts[name] for name in parts if texts[name] != self.part_text.get(name)}
        self.series, self.start, self.parts, self.part_text = new, start, parts, texts
        self._publish({"start": start, "upsert": {k: v for k, v in upsert.items() if v},
                       "remove": {k: v for k, v in remove.items() if v}, "set": changed})

    def _publish(self, body: dict[str, Any]) -> None:
        self.seq += 1
        text = dumps({"seq": self.seq, "at": self.at, **body})
        self.ring.append((self.seq, text))
        chunk = frame(self.event_id(self.seq), "update", text)
        for sub in list(self.subscribers):
            try:
                sub.queue.put_nowait(chunk)
            except asyncio.QueueFull:  # too far behind: let it go; it resumes by Last-Event-ID
                self.subscribers.discard(sub)
                with contextlib.suppress(asyncio.QueueEmpty):
                    sub.queue.get_nowait()
                sub.queue.put_nowait(None)

    def snapshot(self) -> str:
        body = {"seq": self.seq, "at": self.at, "start": self.start, "view": self.view.as_json(),
                "series": {name: sorted(rows.values(), key=lambda r: r[0])
                           for name, rows in self.series.items()},
                "set": self.parts}
        return frame(self.event_id(self.seq), "snapshot", dumps(body))

    def since(self, last_event_id: str | None) -> list[str] | None:
        """The updates after ``last_event_id``, when it is this topic's and they are all still
        kept; else None (a snapshot is due)."""
        if not last_event_id:
            return None
        boot, _, rest = last_event_id.partition(".")
        number, _, seq_text = rest.partition(".")
        if boot != self.hub.boot or number != str(self.number) or not seq_text.isdigit():
            return None
        seq = int(seq_text)
        if seq > self.seq or (seq < self.seq and (not self.ring or self.ring[0][0] > seq + 1)):
            return None
        return [frame(self.event_id(s), "update", text) for s, text in self.ring if s > seq]


def _problem(exc: Exception) -> str:
    return f"the store could not be read: {type(exc).__name__}"


class Hub:
    """The server process's live updates: one LISTEN connection, a topic per view watched."""

    def __init__(self, dsn: str, read: Reader, *, min_interval: float = 1.0,
                 idle_s: float = 5.0, keep: int = 300, linger_s: float = 60.0) -> None:
        self.dsn, self.read = dsn, read
        self.min_interval, self.idle_s, self.keep, self.linger_s = (
            min_interval, idle_s, keep, linger_s)
        self.boot = f"{int(time.time()):x}{os.getpid():x}"
        self.topics: dict[View, Topic] = {}
        self.listening = False
        self.signals = 0
        self._numbers = itertools.count(1)
        self._task: asyncio.Task[None] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._listen(), name="slidewin-listen")

    def end_streams(self) -> None:
        """End every browser's stream now (the server is stopping): each response completes,
        so the server need not wait for them or cut them."""
        for topic in list(self.topics.values()):
            for sub in list(topic.subscribers):
                with contextlib.suppress(asyncio.QueueEmpty):
                    while True:
                        sub.queue.get_nowait()
                sub.queue.put_nowait(None)
            topic.subscribers.clear()

    def stopping(self) -> None:
        """Thread- and signal-safe: end the streams on the event loop."""
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.end_streams)

    async def close(self) -> None:
        self.end_streams()
        for topic in list(self.topics.values()):
            topic.task.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _listen(self) -> None:
        pause = 0.5
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self.dsn, autocommit=True, application_name=LISTEN_APPLICATION)
                async with conn:
                    for channel in CHANNELS:
                        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                    self.listening, pause = True, 0.5
                    self._all_dirty()  # what was missed while not listening
                    async for note in conn.notifies():
                        self.signals += 1
                        self._signal(note.channel, note.payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self.listening:
                    log.warning("lost the store's change signals (%s); reconnecting",
                                type(exc).__name__)
                self.listening = False
            await asyncio.sleep(pause)
            pause = min(pause * 2, 5.0)

    def _signal(self, channel: str, payload: str) -> None:
        for view, topic in self.topics.items():
            if channel == JOINS_CHANNEL or (
                    view.stream == BUILTIN if channel == CHANNEL else view.stream == payload):
                topic.dirty.set()

    def _all_dirty(self) -> None:
        for topic in self.topics.values():
            topic.dirty.set()

    def forget(self, topic: Topic) -> None:
        if self.topics.get(topic.view) is topic:
            del self.topics[topic.view]

    async def subscribe(self, view: View,
                        last_event_id: str | None) -> tuple[Subscriber, list[str]]:
        """A new browser of ``view``: its queue, and what to send it first (the updates it
        missed, or a snapshot). Raises what reading the view raised, before any reading
        succeeded (an unknown stream, a bad measure)."""
        topic = self.topics.get(view)
        if topic is None or topic.task.done():
            topic = self.topics[view] = Topic(self, view, next(self._numbers))
        await topic.ready.wait()
        if topic.seq == 0 and topic.failure is not None:
            self.forget(topic)
            topic.task.cancel()
            raise topic.failure
        sub = Subscriber()
        topic.subscribers.add(sub)
        missed = topic.since(last_event_id)
        return sub, missed if missed is not None else [topic.snapshot()]

    def unsubscribe(self, view: View, sub: Subscriber) -> None:
        topic = self.topics.get(view)
        if topic is not None:
            topic.subscribers.discard(sub)
            if not topic.subscribers:
                topic.idle_since = time.monotonic()

    async def stream(self, view: View, sub: Subscriber, first: list[str],
                     retry_ms: int = 2000) -> AsyncIterator[str]:
        """The event stream of one browser, until it goes (or the server stops)."""
        try:
            yield f"retry: {retry_ms}\n\n"
            for chunk in first:
                yield chunk
            while True:
                try:
                    item = await asyncio.wait_for(sub.queue.get(), timeout=KEEPALIVE_S)
                except TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                if item is None:
                    return
                yield item
        finally:
            self.unsubscribe(view, sub)
