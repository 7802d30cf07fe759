"""Two streams to join: a left stream's records and, for a share of them, a record of a right
stream that refers to one (``slidewin client --stream orders --match shipments.order_id``, and
the demo's orders and shipments).

The left records (orders) are drawn as ``client.sim.typed_generator`` draws any declared
stream's events, at the rate; each should have a key of its own (so ``slidewin client --match``
defaults the left stream's --keys to 0: a fresh key per record). Each left record is chosen,
independently, with probability ``rate`` (--match-rate) to get one right record (a shipment):

- its ``column`` (``order_id``) holds the left record's key;
- its time is the left record's time plus a delay drawn uniformly from
  [delay - jitter, delay + jitter], never below 0 (--delay, --jitter);
- its own key is fresh (the next integer, or a uuid), unless ``column`` is the right stream's
  key; its other columns are drawn by type.

A right record is written when its time comes -- in the first batch at or after it, into
``<landing>/<right>/`` -- so the right stream arrives in time order, as records written when they
happen do. A share ``late_rate`` of them (--late-rate) is written ``late_by`` (--late-by) after
its time instead, behind newer records: late for a join whose grace is shorter, and rejected as
late by the right stream itself when late_by passes the stream's grace.

The run ends at its duration: right records not due by then are never written (``pending``), so
the left records of the last ``delay + jitter`` seconds look unmatched. The same seed and the
same batch times write the same records (one random generator each for the left records, the
right ones and the choices).
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from slidewin.client.sim.generator import Batch, epoch_us, run_paced
from slidewin.client.sim.typed_generator import TypedEventGenerator, TypedGeneratorConfig
from slidewin.db.clock import Clock
from slidewin.db.errors import ConfigError
from slidewin.db.streams import Stream

INTEGER_TYPES = ("bigint", "integer")
MAX_DELAY_S = 86_400.0
# called with (stream name, the keys of the records in a file, when the file appeared)
OnWritten = Callable[[str, list[Any], datetime], None]


@dataclass(frozen=True)
class MatchConfig:
    """The right stream ``stream``, whose ``column`` refers to a left record's key, and how its
    records follow the left ones; each error names the option and a value that works."""

    stream: str
    column: str
    rate: float = 0.8
    delay_s: float = 5.0
    jitter_s: float = 0.0
    late_rate: float = 0.0
    late_by_s: float = 10.0

    def __post_init__(self) -> None:
        for option, share, example in (("--match-rate", self.rate, "0.8"),
                                       ("--late-rate", self.late_rate, "0.01")):
            if not 0 <= share <= 1:
                raise ConfigError(f"{option} {share:g} must be from 0 to 1 (a share of the "
                                  f"records); use e.g. {option} {example}")
        for option, value, example in (("--delay", self.delay_s, "5s"),
                                       ("--jitter", self.jitter_s, "2s")):
            if not 0 <= value <= MAX_DELAY_S:
                raise ConfigError(f"{option} {value:g}s must be from 0 to 1 day; use e.g. "
                                  f"{option} {example}")
        if not 0 < self.late_by_s <= MAX_DELAY_S:
            raise ConfigError(f"--late-by {self.late_by_s:g}s must be more than 0 and at most "
                              "1 day; use e.g. --late-by 10s")

    @classmethod
    def parse(cls, text: str, **kw: Any) -> MatchConfig:
        """``shipments.order_id``: the right stream and its column."""
        stream, dot, column = text.strip().partition(".")
        if not dot or not stream or not column or "." in column:
            raise ConfigError(f"--match {text!r}: write STREAM.COLUMN, the stream whose column "
                              "holds the key of a --stream record, e.g. --match "
                              "shipments.order_id")
        return cls(stream, column, **kw)

    def timing(self) -> str:
        """``5s +- 2s later``, and the late share when there is one."""
        spread = f" +- {self.jitter_s:g}s" if self.jitter_s else ""
        late = (f"; {self.late_rate:.0%} written {self.late_by_s:g}s late"
                if self.late_rate else "")
        return f"{self.delay_s:g}s{spread} later{late}"

    def describe(self) -> str:
        """``80%, 5s +- 2s later``: the share matched and the timing."""
        return f"{self.rate:.0%}, {self.timing()}"


def check_match(left: Stream, right: Stream, match: MatchConfig) -> None:
    """Refuse a right stream that cannot refer to the left stream's records."""
    where = f"--match {match.stream}.{match.column}"
    if right.name == left.name:
        raise ConfigError(f"{where}: the matched stream is --stream itself; name another "
                          "declared stream, e.g. --stream orders --match shipments.order_id")
    if right.builtin:
        raise ConfigError(f"{where}: {right.name} is built in; name a declared stream "
                          "(`slidewin streams list`)")
    try:
        column = right.column(match.column)
    except KeyError:
        names = ", ".join(c.name for c in right.columns)
        raise ConfigError(f"{where}: stream {right.name} has no column {match.column}; its "
                          f"columns are {names}") from None
    if column.name == right.time:
        raise ConfigError(f"{where}: {column.name} is the time column of {right.name}; name "
                          "the column that holds the key of a --stream record")
    key = left.column(left.key)
    if not (column.type == key.type
            or (column.type in INTEGER_TYPES and key.type in INTEGER_TYPES)):
        raise ConfigError(f"{where}: {right.name}.{column.name} is {column.type} but the key "
                          f"{left.name}.{key.name} it refers to is {key.type}; name a column "
                          "of the key's type")


@dataclass
class MatchStats:
    """What the pair of streams wrote, guarded by ``lock`` (the reporter thread reads it)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    left: int = 0  # left records written
    chosen: int = 0  # left records chosen to get a right record
    written: int = 0  # right records written
    late: int = 0  # right records written late_by after their time
    files: int = 0  # right files written

    @property
    def pending(self) -> int:
        """Right records chosen but not written yet (not due)."""
        return self.chosen - self.written

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return {"left": self.left, "chosen": self.chosen, "written": self.written,
                    "late": self.late, "pending": self.pending}


class MatchedStreams:
    """Writes the left stream through ``left`` and the matching right records beside it; its
    ``run`` and ``write_batch`` stand in for the left generator's."""

    def __init__(self, left: TypedEventGenerator, right: Stream, match: MatchConfig,
                 clock: Clock | None = None, on_written: OnWritten | None = None) -> None:
        check_match(left.stream, right, match)
        cfg = left.config
        self.left, self.match, self.on_written = left, match, on_written
        self.clock = clock or left.clock
        seed = cfg.seed
        self.right = TypedEventGenerator(
            TypedGeneratorConfig(cfg.landing, right, rate=cfg.rate, seed=None if seed is None
                                 else seed + 1, fmt=cfg.fmt, keys=0, fsync=cfg.fsync),
            clock=self.clock)
        self.rng = np.random.default_rng(None if seed is None else [seed, 2])
        self.stats = MatchStats()
        # (due, sequence, time, left key, late): due and time in epoch microseconds
        self._queue: list[tuple[int, int, int, Any, bool]] = []
        self._sequence = 0

    def write_batch(self, n: int, start: datetime, end: datetime) -> Batch:
        """n left records created in (start, end], then the right records due by ``end``."""
        columns = self.left.batch(n, start, end)
        batch = self.left.write_columns(columns, start, end)
        with self.stats.lock:
            self.stats.left += n
        self._announce(self.left.stream.name, columns[self.left.stream.key])
        self._choose(columns)
        self.write_due(end)
        return batch

    def _announce(self, stream: str, keys: list[Any]) -> None:
        if self.on_written is not None:
            self.on_written(stream, keys, self.clock())

    def _choose(self, columns: dict[str, list[Any]]) -> None:
        """Queue a right record for each chosen left record, due at its time (or late_by
        after it)."""
        keys, times = columns[self.left.stream.key], columns[self.left.stream.time]
        m = self.match
        chosen = np.flatnonzero(self.rng.random(len(keys)) < m.rate)
        delays = m.delay_s + self.rng.uniform(-m.jitter_s, m.jitter_s, len(chosen))
        delay_us = np.rint(np.maximum(delays, 0.0) * 1e6).astype(np.int64)
        late = self.rng.random(len(chosen)) < m.late_rate
        late_us = round(m.late_by_s * 1e6)
        for i, d, is_late in zip(chosen.tolist(), delay_us.tolist(), late.tolist(), strict=True):
            ts = epoch_us(times[i]) + d
            self._sequence += 1
            heapq.heappush(self._queue, (ts + late_us if is_late else ts, self._sequence, ts,
                                         keys[i], is_late))
        with self.stats.lock:
            self.stats.chosen += len(chosen)

    def write_due(self, now: datetime) -> Batch | None:
        """Write the right records due by ``now`` as one file (None: none was due)."""
        now_us = epoch_us(now)
        due = []
        while self._queue and self._queue[0][0] <= now_us:
            due.append(heapq.heappop(self._queue))
        if not due:
            return None
        ts_us = np.array([d[2] for d in due], dtype=np.int64)
        columns = self.right.rows(ts_us, given={self.match.column: [d[3] for d in due]})
        times = columns[self.right.stream.time]
        try:
            batch = self.right.write_columns(columns, min(times), max(times))
        except OSError:
            for entry in due:  # written with the next batch
                heapq.heappush(self._queue, entry)
            raise
        with self.stats.lock:
            self.stats.written += len(due)
            self.stats.late += sum(1 for d in due if d[4])
            self.stats.files += 1
        self._announce(self.right.stream.name, columns[self.right.stream.key])
        return batch

    def run(self, stop: threading.Event, until: float | None = None,
            on_batch: Callable[[Batch], None] | None = None) -> None:
        """Write at the left stream's rate until ``stop`` or ``until`` (``run_paced``);
        ``on_batch`` sees the left batches."""
        cfg = self.left.config
        run_paced(self.write_batch, self.left.stats, self.clock, rate=cfg.rate,
                  batch_interval_s=cfg.batch_interval_s,
                  unthrottled_batch=cfg.unthrottled_batch, stop=stop, until=until,
                  on_batch=on_batch)


def match_line(stats: MatchStats, left: str, right: str, match: MatchConfig) -> str:
    """One line: how many left records got a right record so far, and how."""
    s = stats.snapshot()
    share = f" ({s['chosen'] / s['left']:.1%})" if s["left"] else ""
    late = f", {s['late']} of them late" if match.late_rate else ""
    return (f"Matches: {s['chosen']} of {s['left']} records of {left}{share} get a record of "
            f"{right} ({match.describe()}): {s['written']} written{late}, {s['pending']} not "
            "due yet")
