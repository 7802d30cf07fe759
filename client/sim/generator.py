"""The event generator: random events written into the landing directory as atomic files.

An event is a random uuid (uuid4 text), a gaussian ``val`` (mean 0, sd 1000, rounded to an
integer, as VoltDB's client did) and ``ts`` = its creation time (UTC, from an injected clock).

Speed: the generator must never be the bottleneck (>= 500,000 events/s unthrottled), so a batch
is built with numpy, not per-event Python: uuids are random bytes with the version/variant bits
set and hex-encoded through a lookup table; values and timestamps are formatted digit by digit
as byte columns; each row is laid out in a fixed-width byte matrix and the padding is dropped
with one boolean mask (row-major order keeps the rows in sequence). CSV and JSON Lines share
that layout (``prefix uuid sep1 val sep2 ts suffix``); Parquet goes through pyarrow.

Atomicity: a batch is written to ``.<name>.tmp`` in the landing directory, flushed, then renamed
to its final name, so a reader listing the directory never sees a partial file (readers skip
dot-files). No fsync: a crash loses at most unrenamed temp files, and the demo is not a
durability test; ``fsync=True`` turns it on.

Timestamps within a batch are spread evenly over the interval since the previous batch, so the
per-second counts match the rate, and the generator records how many events it wrote for each
second (``written_per_second``) -- the freshness tracker compares those with the rollups.

Keys: by default every event gets a fresh uuid4, as VoltDB's client did. With ``keys`` = N the
events draw their keys from a pool of N uuids made once (from the seed), and each key lives in
bursts and pauses so session windows form: key k is active while ``(t + phase_k) mod (burst_k +
pause_k) < burst_k``, with burst_k and pause_k drawn uniformly within +-50 % of ``burst_s`` and
``pause_s`` and a random phase, so keys do not pulse in step. Each event takes a key active at
its own time (all keys, at a moment when none is): the rate and the per-second counts are
unchanged, and only the keys' pattern differs.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from slidewin.db.clock import Clock, utc_now
from slidewin.db.errors import ConfigError

FORMATS = ("csv", "jsonl", "parquet")
_SUFFIX = {"csv": ".csv", "jsonl": ".jsonl", "parquet": ".parquet"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_HEX_PAIRS = np.stack([_HEX[np.arange(256) >> 4], _HEX[np.arange(256) & 15]], axis=1)
_HEX_PAIRS16 = np.ascontiguousarray(_HEX_PAIRS).view(np.uint16).ravel()  # byte -> 2 hex digits
# the 8-4-4-4-12 groups of the 32 hex digits, and where each starts in the 36-character text
_UUID_GROUPS = ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32))
_TS_LEN = 27  # 2026-01-01T12:00:00.123456Z
MAX_KEYS = 10_000_000

@dataclass(frozen=True)
class GeneratorConfig:
    """What to write where. ``rate`` is events/s; 0 means as fast as possible."""

    landing: Path
    rate: float = 15000.0
    batch_interval_s: float = 0.2
    unthrottled_batch: int = 100_000
    seed: int | None = None
    fmt: str = "csv"
    sd: float = 1000.0
    fsync: bool = False
    keys: int | None = None  # a pool of this many keys (None: a fresh uuid per event)
    burst_s: float = 5.0
    pause_s: float = 20.0

    def __post_init__(self) -> None:
        if self.rate < 0:
            raise ConfigError(f"rate must be >= 0 events/s (0 = unthrottled), got {self.rate}")
        if not 0.001 <= self.batch_interval_s <= 10:
            raise ConfigError(
                f"batch_interval_s must be between 0.001 and 10, got {self.batch_interval_s}"
            )
        if self.unthrottled_batch < 1:
            raise ConfigError(f"unthrottled_batch must be >= 1, got {self.unthrottled_batch}")
        if self.fmt not in FORMATS:
            raise ConfigError(f"format {self.fmt!r} is not one of {', '.join(FORMATS)}")
        check_keys(self.keys, self.burst_s, self.pause_s)


def check_keys(keys: int | None, burst_s: float, pause_s: float) -> None:
    """The keyed-traffic options, each error naming the option and the fix."""
    if keys is not None and not 0 <= keys <= MAX_KEYS:
        raise ConfigError(f"--keys {keys} must be from 0 to {MAX_KEYS:,}; use e.g. --keys 1000 "
                          "(0: a fresh key per event)")
    for name, value, example in (("--burst", burst_s, "5s"), ("--pause", pause_s, "20s")):
        if not 0 < value <= 3600:
            raise ConfigError(f"{name} {value:g}s must be more than 0 and at most 1h; use e.g. "
                              f"{name} {example}")


@dataclass(frozen=True)
class Batch:
    """One written file: its events were created in (start, end]; ``seconds`` maps each
    epoch second to how many of its events fall in it."""

    path: Path
    count: int
    start: datetime
    end: datetime
    seconds: dict[int, int]


@dataclass
class GeneratorStats:
    """Shared with the reporter and tracker threads; guarded by ``lock``."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    events: int = 0
    files: int = 0
    failures: int = 0
    written_per_second: dict[int, int] = field(default_factory=dict)


def write_atomically(folder: Path, name: str, write: Callable[[Path], None]) -> Path:
    """``write(tmp)`` into ``.<name>.tmp`` in ``folder``, then rename it to ``name``: a reader
    listing the folder never sees a partial file. Returns the final path."""
    final, tmp = folder / name, folder / f".{name}.tmp"
    write(tmp)
    os.replace(tmp, final)
    return final


def per_second(ts_us: np.ndarray) -> dict[int, int]:
    """How many of the timestamps (epoch microseconds) fall in each epoch second."""
    secs, counts = np.unique(ts_us // 1_000_000, return_counts=True)
    return {int(s): int(c) for s, c in zip(secs, counts, strict=True)}


def record_written(stats: GeneratorStats, n: int, seconds: dict[int, int]) -> None:
    """Count one written file of ``n`` events in ``stats``."""
    with stats.lock:
        stats.events += n
        stats.files += 1
        for sec, count in seconds.items():
            stats.written_per_second[sec] = stats.written_per_second.get(sec, 0) + count


def epoch_us(ts: datetime) -> int:
    """Microseconds since the epoch of an aware datetime (exact integer arithmetic)."""
    delta = ts - _EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


class EventGenerator:
    """Builds batches of random events and writes them atomically into ``config.landing``."""

    def __init__(self, config: GeneratorConfig, clock: Clock = utc_now) -> None:
        self.config = config
        self.clock = clock
        self.rng = np.random.default_rng(config.seed)
        self.stats = GeneratorStats()
        self._sequence = 0
        self._prefix = f"ev-{os.getpid()}-{int(time.time() * 1000)}"
        self.pool = KeyPool.make(self, config) if config.keys else None  # 0, None: fresh uuids
        config.landing.mkdir(parents=True, exist_ok=True)

    # ---- building -------------------------------------------------------------------------
    def uuids(self, n: int) -> np.ndarray:
        """(n, 36) uint8: uuid4 texts, lower-case hex, RFC 4122 version and variant bits."""
        raw = np.frombuffer(self.rng.bytes(16 * n), dtype=np.uint8).reshape(n, 16).copy()
        raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40
        raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80
        hexed = _HEX_PAIRS16[raw].view(np.uint8)  # (n, 32): two hex digits per byte
        out = np.empty((n, 36), dtype=np.uint8)
        for (src0, src1), dst0 in zip(_UUID_GROUPS, (0, 9, 14, 19, 24), strict=True):
            out[:, dst0:dst0 + src1 - src0] = hexed[:, src0:src1]
        out[:, [8, 13, 18, 23]] = ord("-")
        return out

    def values(self, n: int) -> np.ndarray:
        """Gaussian values, sd ``config.sd``, rounded to the nearest integer."""
        return np.rint(self.rng.normal(0.0, self.config.sd, n)).astype(np.int64)

    @staticmethod
    def spread(start_us: int, end_us: int, n: int) -> np.ndarray:
        """n timestamps (epoch microseconds) evenly spread over (start, end]."""
        step = (end_us - start_us) / n
        return start_us + np.ceil(step * np.arange(1, n + 1)).astype(np.int64)

    # ---- writing --------------------------------------------------------------------------
    def write_batch(self, n: int, start: datetime, end: datetime) -> Batch:
        """Write n events created in (start, end] as one file that appears atomically."""
        ts_us = self.spread(epoch_us(start), epoch_us(end), n)
        uuids = self.uuids(n) if self.pool is None else self.pool.draw(self.rng, ts_us)
        vals = self.values(n)
        self._sequence += 1
        name = f"{self._prefix}-{self._sequence:08d}{_SUFFIX[self.config.fmt]}"
        fmt, fsync = self.config.fmt, self.config.fsync
        if fmt == "parquet":
            final = write_atomically(self.config.landing, name,
                                     lambda tmp: _write_parquet(tmp, uuids, vals, ts_us))
        else:
            data = render_rows(uuids, vals, ts_us, fmt)
            final = write_atomically(self.config.landing, name,
                                     lambda tmp: _write_bytes(tmp, data, fsync))
        seconds = per_second(ts_us)
        record_written(self.stats, n, seconds)
        return Batch(final, n, start, end, seconds)

    def run(
        self,
        stop: threading.Event,
        until: float | None = None,
        on_batch: Callable[[Batch], None] | None = None,
    ) -> None:
        """Write batches until ``stop`` is set or ``time.monotonic()`` passes ``until``
        (``run_paced``)."""
        cfg = self.config
        run_paced(self.write_batch, self.stats, self.clock, rate=cfg.rate,
                  batch_interval_s=cfg.batch_interval_s, unthrottled_batch=cfg.unthrottled_batch,
                  stop=stop, until=until, on_batch=on_batch)


def run_paced(
    write_batch: Callable[[int, datetime, datetime], Batch],
    stats: GeneratorStats,
    clock: Clock,
    *,
    rate: float,
    batch_interval_s: float,
    unthrottled_batch: int,
    stop: threading.Event,
    until: float | None = None,
    on_batch: Callable[[Batch], None] | None = None,
) -> None:
    """Call ``write_batch(n, start, end)`` until ``stop`` is set or ``time.monotonic()`` passes
    ``until``; a write that fails with OSError is counted in ``stats.failures``.

    Throttled: every batch interval, write the events due at the rate since the last batch
    (so the long-run rate is exact even when a batch is late). Unthrottled (``rate`` 0):
    fixed-size batches back to back.
    """
    began_mono, last = time.monotonic(), clock()
    due_total = 0.0
    while not stop.is_set() and (until is None or time.monotonic() < until):
        if rate > 0:
            stop.wait(batch_interval_s)
            elapsed = time.monotonic() - began_mono
            n = int(rate * elapsed - due_total)
        else:
            n = unthrottled_batch
        now = clock()
        if n <= 0 or now <= last:
            continue
        due_total += n
        try:
            batch = write_batch(n, last, now)
        except OSError:
            with stats.lock:
                stats.failures += 1
            continue
        last = now
        if on_batch is not None:
            on_batch(batch)


@dataclass(frozen=True)
class KeyPool:
    """``keys`` uuids and each one's burst/pause schedule (seconds)."""

    uuids: np.ndarray  # (keys, 36) uint8
    burst: np.ndarray
    period: np.ndarray
    phase: np.ndarray

    @classmethod
    def make(cls, gen: EventGenerator, config: GeneratorConfig) -> KeyPool:
        n = int(config.keys or 0)
        burst = config.burst_s * gen.rng.uniform(0.5, 1.5, n)
        period = burst + config.pause_s * gen.rng.uniform(0.5, 1.5, n)
        return cls(gen.uuids(n), burst, period, gen.rng.uniform(0.0, period))

    def active(self, t_s: float) -> np.ndarray:
        """Indexes of the keys in a burst at ``t_s`` (epoch seconds); every key when none is."""
        found = np.flatnonzero(np.mod(t_s + self.phase, self.period) < self.burst)
        return found if len(found) else np.arange(len(self.uuids))

    def draw(self, rng: np.random.Generator, ts_us: np.ndarray) -> np.ndarray:
        """A key for each event, among the keys active at its time (looked up per 100 ms:
        a batch spans 0.2 s, so a handful of lookups)."""
        out = np.empty(len(ts_us), dtype=np.int64)
        slot = ts_us // 100_000
        for s in np.unique(slot):
            rows = np.flatnonzero(slot == s)
            out[rows] = rng.choice(self.active(s / 10), len(rows))
        return self.uuids[out]


def render_rows(uuids: np.ndarray, vals: np.ndarray, ts_us: np.ndarray, fmt: str) -> bytes:
    """CSV (with header) or JSON Lines bytes for the given columns, built without a Python loop
    over rows."""
    if fmt == "csv":
        head, parts = b"uuid,val,ts\n", (b"", b",", b",", b"\n")
    else:
        parts = (b'{"uuid":"', b'","val":', b',"ts":"', b'"}\n')
        head = b""
    val_chars, val_len = format_ints(vals)
    ts_chars = format_ts(ts_us)
    return head + _layout(parts, uuids, val_chars, val_len, ts_chars)


def _layout(
    parts: tuple[bytes, bytes, bytes, bytes],
    uuids: np.ndarray,
    val_chars: np.ndarray,
    val_len: np.ndarray,
    ts_chars: np.ndarray,
) -> bytes:
    prefix, sep1, sep2, suffix = (np.frombuffer(p, dtype=np.uint8) for p in parts)
    n, width = len(uuids), val_chars.shape[1]
    head = np.concatenate([np.broadcast_to(prefix, (n, len(prefix))), uuids,
                           np.broadcast_to(sep1, (n, len(sep1)))], axis=1)
    tail = np.concatenate([np.broadcast_to(sep2, (n, len(sep2))), ts_chars,
                           np.broadcast_to(suffix, (n, len(suffix)))], axis=1)
    hw, tw = head.shape[1], tail.shape[1]
    matrix = np.zeros((n, hw + width + tw), dtype=np.uint8)
    matrix[:, :hw] = head
    matrix[:, hw:hw + width] = val_chars
    for length in np.unique(val_len):  # a handful of widths: contiguous column slices
        rows = np.flatnonzero(val_len == length)
        matrix[rows, hw + length:hw + length + tw] = tail[rows]
    keep = np.arange(matrix.shape[1]) < (hw + val_len + tw)[:, None]
    return matrix[keep].tobytes()


def format_ints(vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Left-aligned decimal text of int64 values: ((n, width) uint8, lengths)."""
    neg = vals < 0
    mag = np.abs(vals).astype(np.uint64)
    digits = np.ones(len(vals), dtype=np.int64)
    for k in range(1, 20):
        digits += mag >= np.uint64(10**k)
    length = digits + neg
    width = int(length.max()) if len(vals) else 1
    chars = np.zeros((len(vals), width), dtype=np.uint8)
    chars[:, 0] = np.where(neg, ord("-"), 0)
    rows = np.arange(len(vals))
    for k in range(int(digits.max()) if len(vals) else 0):
        has = digits > k
        digit = (mag // np.uint64(10**k)) % np.uint64(10)
        pos = neg.astype(np.int64) + digits - 1 - k
        chars[rows[has], pos[has]] = digit[has].astype(np.uint8) + ord("0")
    return chars, length


def format_ts(ts_us: np.ndarray) -> np.ndarray:
    """(n, 27) uint8: ISO 8601 UTC text with microseconds, e.g. 2026-01-01T12:00:00.123456Z."""
    secs, micros = np.divmod(ts_us, 1_000_000)
    unique, inverse = np.unique(secs, return_inverse=True)
    heads = np.array(
        [list(datetime.fromtimestamp(int(s), UTC).strftime("%Y-%m-%dT%H:%M:%S.").encode())
         for s in unique],
        dtype=np.uint8,
    ).reshape(len(unique), 20)
    out = np.empty((len(ts_us), _TS_LEN), dtype=np.uint8)
    out[:, :20] = heads[inverse]
    for k in range(6):
        out[:, 25 - k] = (micros // 10**k) % 10 + ord("0")
    out[:, 26] = ord("Z")
    return out


def _write_bytes(path: Path, data: bytes, fsync: bool) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        if fsync:
            fh.flush()
            os.fsync(fh.fileno())


def _write_parquet(path: Path, uuids: np.ndarray, vals: np.ndarray, ts_us: np.ndarray) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = len(uuids)
    offsets = pa.py_buffer(np.arange(0, 36 * (n + 1), 36, dtype=np.int32).tobytes())
    uuid_col = pa.StringArray.from_buffers(n, offsets, pa.py_buffer(uuids.tobytes()))
    table = pa.table({
        "uuid": uuid_col,
        "val": pa.array(vals, type=pa.int64()),
        "ts": pa.array(ts_us, type=pa.timestamp("us", tz="UTC")),
    })
    pq.write_table(table, path, compression="snappy")
