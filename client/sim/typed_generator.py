"""Events of a declared stream's shape, written into ``<landing>/<name>/`` as atomic files.

The built-in generator (``client.sim.generator``) writes ``(uuid, val, ts)``; this one writes
whatever a declared stream (``db.streams.Stream``) declares, each column drawn by its type:

=====================  ==========================================================================
column                 values
=====================  ==========================================================================
the key                from a pool of ``keys`` values (``sensor-0042`` for a text key, 1..N for
                       an integer one), each key active in bursts and pauses as the built-in
                       generator's pool; ``keys`` 0 or None: a fresh value per event (a uuid4,
                       or the next integer)
the time column        the event's creation time, UTC, microseconds, spread evenly over the
                       batch's interval (so the per-second counts follow the rate)
``text``               a short word
``bigint``/``integer`` an integer from 0 to 1,000
``double precision``   a random walk per key around a base of its own (a temperature: base 10-30,
                       steps of sd 0.1), rounded to 3 decimals
``numeric``            a decimal with 2 digits after the point from -1,000 to 1,000
``numeric(p,s)``       a decimal with ``s`` digits after the point (at most 12 of them drawn) and
                       at most ``p - s`` before it, never above 1,000, sign included: it fits
``boolean``            true or false
``timestamptz``        a time within the hour before the event
``jsonb``              a small object: ``{"level": 0-9, "tag": a word}``
=====================  ==========================================================================

A column that is neither the key, the time nor required is NULL in a few events: about 1 in
100 for a measure, 1 in 20 for any other. Files are JSON Lines, CSV with a header row, or
Parquet with typed columns (``numeric(p,s)`` as decimal128 up to 38 digits, else as text;
``jsonb`` as a struct), the formats the ingest of declared streams reads by column name; each
file is written under a dot-name and renamed when complete, as the built-in generator does.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from slidewin.client.sim.generator import (
    FORMATS,
    Batch,
    GeneratorStats,
    KeyPool,
    check_keys,
    epoch_us,
    per_second,
    record_written,
    run_paced,
    write_atomically,
)
from slidewin.db.clock import Clock, utc_now
from slidewin.db.errors import ConfigError
from slidewin.db.streams import Column, Stream

WORDS = ("north", "south", "east", "west", "alpha", "beta", "gamma", "delta", "red", "green",
         "blue", "amber", "oak", "pine", "river", "hill", "dock", "yard", "lab", "roof")
INT_HIGH = 1000
MAX_SCALE = 12
MEASURE_NULLS = 0.01
OTHER_NULLS = 0.05
_NUMERIC = re.compile(r"^numeric\((\d+),(\d+)\)$")
_SUFFIX = {"csv": ".csv", "jsonl": ".jsonl", "parquet": ".parquet"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DEFAULT_KEYS = 100


@dataclass(frozen=True)
class TypedGeneratorConfig:
    """What to write where: ``landing`` is the landing directory (files go to
    ``landing/<stream name>/``); ``rate`` events/s (0: as fast as possible)."""

    landing: Path
    stream: Stream
    rate: float = 1000.0
    batch_interval_s: float = 0.2
    unthrottled_batch: int = 10_000
    seed: int | None = None
    fmt: str = "jsonl"
    keys: int | None = DEFAULT_KEYS
    burst_s: float = 5.0
    pause_s: float = 20.0
    fsync: bool = False

    def __post_init__(self) -> None:
        if self.stream.builtin:
            raise ConfigError(f"stream {self.stream.name} is built in: use the client's own "
                              "generator (client.sim.generator)")
        if self.rate < 0:
            raise ConfigError(f"rate must be >= 0 events/s (0 = unthrottled), got {self.rate}")
        if self.fmt not in FORMATS:
            raise ConfigError(f"format {self.fmt!r} is not one of {', '.join(FORMATS)}")
        check_keys(self.keys, self.burst_s, self.pause_s)

    @property
    def folder(self) -> Path:
        return self.landing / self.stream.name


def numeric_bounds(type_: str) -> tuple[int, int]:
    """(largest number of units, scale) of a numeric type's generated values: a value is
    ``units * 10**-scale`` with ``|units| <= largest``, which fits ``numeric(p,s)`` (at most
    ``p`` digits) and stays within 1,000."""
    match = _NUMERIC.match(type_)
    if match is None:  # unconstrained numeric
        return INT_HIGH * 100, 2
    precision, scale = int(match[1]), int(match[2])
    used = min(scale, MAX_SCALE)  # digits after the point drawn (the rest are zeros)
    return min(10 ** (precision - scale + used) - 1, INT_HIGH * 10**used), used


class TypedEventGenerator:
    """Builds batches of one declared stream's events and writes them atomically."""

    def __init__(self, config: TypedGeneratorConfig, clock: Clock = utc_now) -> None:
        self.config, self.clock = config, clock
        self.stream = config.stream
        self.rng = np.random.default_rng(config.seed)
        self.stats = GeneratorStats()
        self._sequence = 0
        self._next_key = 0
        self._prefix = f"{self.stream.name}-{os.getpid()}-{int(time.time() * 1000)}"
        self.measures = frozenset(self.stream.measures)
        self.key_column = self.stream.column(self.stream.key)
        self.pool: KeyPool | None = None
        if config.keys:
            burst = config.burst_s * self.rng.uniform(0.5, 1.5, config.keys)
            period = burst + config.pause_s * self.rng.uniform(0.5, 1.5, config.keys)
            self.pool = KeyPool(np.arange(config.keys), burst, period,
                                self.rng.uniform(0.0, period))
        # per double column: each key's walk (a base and where it is now), grown as keys appear
        self._walks: dict[str, dict[Any, float]] = {}
        config.folder.mkdir(parents=True, exist_ok=True)

    # ---- values ---------------------------------------------------------------------------
    def keys(self, ts_us: np.ndarray) -> list[Any]:
        """A key per event: from the pool (those active at its time), or a fresh one each."""
        integer = self.key_column.type in ("bigint", "integer")
        if self.pool is not None:
            picked = self.pool.draw(self.rng, ts_us)
            if integer:
                return [int(k) + 1 for k in picked]
            return [f"{self.stream.key}-{int(k):04d}" for k in picked]
        if integer:
            first = self._next_key + 1
            self._next_key += len(ts_us)
            return list(range(first, first + len(ts_us)))
        return [str(uuid.UUID(bytes=self.rng.bytes(16), version=4)) for _ in range(len(ts_us))]

    def column(self, col: Column, keys: Sequence[Any], times: Sequence[datetime]) -> list[Any]:
        """n values of one (non-key, non-time) column, by its type."""
        n = len(keys)
        type_ = col.type
        values: list[Any]
        if type_ == "text":
            values = [WORDS[i] for i in self.rng.integers(0, len(WORDS), n)]
        elif type_ in ("bigint", "integer"):
            values = [int(v) for v in self.rng.integers(0, INT_HIGH + 1, n)]
        elif type_ == "double precision":
            values = self._walk(col.name, keys)
        elif type_ == "numeric" or type_.startswith("numeric("):
            largest, scale = numeric_bounds(type_)
            units = self.rng.integers(-largest, largest + 1, n)
            values = [Decimal(int(u)).scaleb(-scale) for u in units]
        elif type_ == "boolean":
            values = [bool(b) for b in self.rng.integers(0, 2, n)]
        elif type_ == "timestamptz":
            back = self.rng.integers(0, 3_600_000_000, n)
            values = [t - timedelta(microseconds=int(b)) for t, b in zip(times, back, strict=True)]
        elif type_ == "jsonb":
            levels = self.rng.integers(0, 10, n)
            tags = self.rng.integers(0, len(WORDS), n)
            values = [{"level": int(lv), "tag": WORDS[t]} for lv, t in zip(levels, tags,
                                                                           strict=True)]
        else:
            raise ConfigError(f"column {col.name} has type {type_}, which the generator does "
                              "not know")
        if col.required:
            return values
        share = MEASURE_NULLS if col.name in self.measures else OTHER_NULLS
        nulls = set(np.flatnonzero(self.rng.random(n) < share).tolist())
        return [None if i in nulls else v for i, v in enumerate(values)]

    def _walk(self, name: str, keys: Sequence[Any]) -> list[float]:
        """Each key's own random walk (a temperature): base 10-30, steps of sd 0.1."""
        walks = self._walks.setdefault(name, {})
        steps = self.rng.normal(0.0, 0.1, len(keys))
        out = []
        for key, step in zip(keys, steps, strict=True):
            now = walks.get(key)
            now = float(self.rng.uniform(10.0, 30.0)) if now is None else now + float(step)
            if len(walks) < 100_000 or key in walks:  # fresh keys: no state kept forever
                walks[key] = now
            out.append(round(now, 3))
        return out

    def rows(self, ts_us: np.ndarray,
             given: dict[str, list[Any]] | None = None) -> dict[str, list[Any]]:
        """The columns of one batch, by name, in the stream's column order; the columns in
        ``given`` take its values (``client.sim.matched``: a column that refers to another
        stream's records), the others are drawn."""
        given = given or {}
        times = [_EPOCH + timedelta(microseconds=int(t)) for t in ts_us]
        keys = given[self.stream.key] if self.stream.key in given else self.keys(ts_us)
        out: dict[str, list[Any]] = {}
        for col in self.stream.columns:
            if col.name in given:
                out[col.name] = given[col.name]
            elif col.name == self.stream.key:
                out[col.name] = keys
            elif col.name == self.stream.time:
                out[col.name] = times
            else:
                out[col.name] = self.column(col, keys, times)
        return out

    def batch(self, n: int, start: datetime, end: datetime) -> dict[str, list[Any]]:
        """n events created in (start, end], as columns."""
        step = (epoch_us(end) - epoch_us(start)) / n
        ts_us = epoch_us(start) + np.ceil(step * np.arange(1, n + 1)).astype(np.int64)
        return self.rows(ts_us)

    # ---- writing --------------------------------------------------------------------------
    def write_batch(self, n: int, start: datetime, end: datetime) -> Batch:
        """Write n events created in (start, end] as one file that appears atomically."""
        return self.write_columns(self.batch(n, start, end), start, end)

    def write_columns(self, columns: dict[str, list[Any]], start: datetime,
                      end: datetime) -> Batch:
        """Write one batch's columns (``rows``) as one file that appears atomically; its
        events' times are within (start, end]."""
        n = len(columns[self.stream.time])
        self._sequence += 1
        fmt = self.config.fmt
        name = f"{self._prefix}-{self._sequence:08d}{_SUFFIX[fmt]}"
        write: Callable[[Path], None]
        if fmt == "parquet":
            table = parquet_table(self.stream, columns)

            def write(tmp: Path) -> None:
                import pyarrow.parquet as pq

                pq.write_table(table, tmp, compression="snappy")
        else:
            data = (render_csv if fmt == "csv" else render_jsonl)(columns).encode()

            def write(tmp: Path) -> None:
                with open(tmp, "wb") as fh:
                    fh.write(data)
                    if self.config.fsync:
                        fh.flush()
                        os.fsync(fh.fileno())
        final = write_atomically(self.config.folder, name, write)
        times = columns[self.stream.time]
        seconds = per_second(np.array([epoch_us(t) for t in times], dtype=np.int64))
        record_written(self.stats, n, seconds)
        return Batch(final, n, start, end, seconds)

    def run(self, stop: threading.Event, until: float | None = None,
            on_batch: Callable[[Batch], None] | None = None) -> None:
        """Write batches at the rate until ``stop`` is set or ``time.monotonic()`` passes
        ``until`` (``client.sim.generator.run_paced``)."""
        cfg = self.config
        run_paced(self.write_batch, self.stats, self.clock, rate=cfg.rate,
                  batch_interval_s=cfg.batch_interval_s, unthrottled_batch=cfg.unthrottled_batch,
                  stop=stop, until=until, on_batch=on_batch)


# ---- formats ----------------------------------------------------------------------------


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="microseconds").replace("+00:00", "Z")


def json_value(value: Any) -> str:
    """One value as JSON text: decimals as exact numbers, times as ISO-8601 strings."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime):
        return json.dumps(_iso(value))
    return json.dumps(value, separators=(",", ":"))


def render_jsonl(columns: dict[str, list[Any]]) -> str:
    """One JSON object per event; a NULL is left out (the ingest reads a missing field as
    NULL)."""
    names = list(columns)
    keys = [json.dumps(name) for name in names]
    lines = []
    for row in zip(*columns.values(), strict=True):
        fields = [f"{k}:{json_value(v)}" for k, v in zip(keys, row, strict=True) if v is not None]
        lines.append("{" + ",".join(fields) + "}\n")
    return "".join(lines)


def csv_value(value: Any) -> str:
    """One value as a CSV field: empty for NULL, JSON text for an object."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return _iso(value)
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, float):
        return repr(value)
    return str(value)


def render_csv(columns: dict[str, list[Any]]) -> str:
    """CSV with a header row naming the columns."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(list(columns))
    for row in zip(*columns.values(), strict=True):
        writer.writerow([csv_value(v) for v in row])
    return buf.getvalue()


def parquet_table(stream: Stream, columns: dict[str, list[Any]]) -> Any:
    """A pyarrow table with a typed column per declared column."""
    import pyarrow as pa

    arrays = {}
    for col in stream.columns:
        values = columns[col.name]
        match = _NUMERIC.match(col.type)
        if col.type == "text":
            arrays[col.name] = pa.array(values, type=pa.string())
        elif col.type == "bigint":
            arrays[col.name] = pa.array(values, type=pa.int64())
        elif col.type == "integer":
            arrays[col.name] = pa.array(values, type=pa.int32())
        elif col.type == "double precision":
            arrays[col.name] = pa.array(values, type=pa.float64())
        elif match is not None and int(match[1]) <= 38:
            arrays[col.name] = pa.array(values, type=pa.decimal128(int(match[1]), int(match[2])))
        elif col.type.startswith("numeric"):
            arrays[col.name] = pa.array([None if v is None else str(v) for v in values],
                                        type=pa.string())
        elif col.type == "boolean":
            arrays[col.name] = pa.array(values, type=pa.bool_())
        elif col.type == "timestamptz":
            arrays[col.name] = pa.array(values, type=pa.timestamp("us", tz="UTC"))
        elif col.type == "jsonb":
            arrays[col.name] = pa.array(
                values, type=pa.struct([("level", pa.int64()), ("tag", pa.string())]))
        else:
            raise ConfigError(f"column {col.name} has type {col.type}, which the generator does "
                              "not know")
    return pa.table(arrays)
