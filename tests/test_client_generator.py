"""The event generator: files that parse, with the right shape, counts and (roughly) rate."""

from __future__ import annotations

import csv
import io
import json
import re
import threading
import time
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from slidewin.client.sim.generator import (
    FORMATS,
    EventGenerator,
    GeneratorConfig,
    epoch_us,
    format_ints,
    format_ts,
)
from slidewin.db.errors import ConfigError
from tests.conftest import T0

UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def _rows(path, fmt):
    if fmt == "csv":
        text = path.read_text()
        assert text.startswith("uuid,val,ts\n")
        return [(r["uuid"], int(r["val"]), datetime.fromisoformat(r["ts"]))
                for r in csv.DictReader(io.StringIO(text))]
    if fmt == "jsonl":
        return [(d["uuid"], d["val"], datetime.fromisoformat(d["ts"]))
                for d in map(json.loads, path.read_text().splitlines())]
    return [(d["uuid"], d["val"], d["ts"]) for d in pq.read_table(path).to_pylist()]


@pytest.mark.parametrize("fmt", FORMATS)
def test_batch_parses_with_the_right_shape(tmp_path, fmt):
    gen = EventGenerator(GeneratorConfig(tmp_path, seed=7, fmt=fmt))
    batch = gen.write_batch(3000, T0, T0 + timedelta(seconds=1.5))
    rows = _rows(batch.path, fmt)
    assert len(rows) == batch.count == 3000
    for uuid, val, ts in rows:
        assert UUID4.match(uuid), uuid
        assert isinstance(val, int)
        assert ts.utcoffset() == timedelta(0)
        assert T0 < ts <= T0 + timedelta(seconds=1.5)
    assert len({r[0] for r in rows}) == 3000
    # evenly spread over (T0, T0+1.5s], one every 0.5 ms: 12:00:00.0005 .. 12:00:00.9995 is
    # 1999 events, 12:00:01.0000 .. 12:00:01.5000 is 1001
    secs = sorted(batch.seconds.items())
    assert [c for _, c in secs] == [1999, 1001]
    assert secs[0][0] == epoch_us(T0) // 1_000_000
    assert sum(1 for r in rows if r[2] < T0 + timedelta(seconds=1)) == 1999


def test_values_are_gaussian_with_sd_1000(tmp_path):
    vals = EventGenerator(GeneratorConfig(tmp_path, seed=1)).values(100_000)
    assert vals.dtype == np.int64
    assert abs(vals.mean()) < 30
    assert 950 < vals.std() < 1050


def test_same_seed_same_events(tmp_path):
    end = T0 + timedelta(seconds=1)
    a = EventGenerator(GeneratorConfig(tmp_path / "a", seed=3)).write_batch(10, T0, end)
    b = EventGenerator(GeneratorConfig(tmp_path / "b", seed=3)).write_batch(10, T0, end)
    assert a.path.read_bytes() == b.path.read_bytes()


def test_files_appear_atomically_and_no_temp_is_left(tmp_path):
    gen = EventGenerator(GeneratorConfig(tmp_path, rate=0, unthrottled_batch=500, seed=2))
    gen.run(threading.Event(), until=time.monotonic() + 0.3)
    names = [p.name for p in tmp_path.iterdir()]
    assert names and not [n for n in names if n.startswith(".")]
    assert gen.stats.files == len(names)
    assert gen.stats.events == 500 * len(names)
    assert sum(gen.stats.written_per_second.values()) == gen.stats.events


def test_throttled_rate_is_roughly_the_rate(tmp_path):
    gen = EventGenerator(GeneratorConfig(tmp_path, rate=2000, batch_interval_s=0.05, seed=4))
    began = time.monotonic()
    gen.run(threading.Event(), until=began + 1.0)
    elapsed = time.monotonic() - began
    # sanity, not timing: the count follows the clock, not the number of loop turns
    assert 0.5 * 2000 * elapsed < gen.stats.events <= 2000 * elapsed + 1


def test_stop_ends_the_run(tmp_path):
    stop = threading.Event()
    gen = EventGenerator(GeneratorConfig(tmp_path, rate=1000, seed=5))
    thread = threading.Thread(target=gen.run, args=(stop,))
    thread.start()
    stop.set()
    thread.join(timeout=5)
    assert not thread.is_alive()


@given(st.lists(st.integers(-(2**63) + 1, 2**63 - 1), min_size=1, max_size=50))
def test_format_ints_matches_str(values):
    chars, lengths = format_ints(np.array(values, dtype=np.int64))
    texts = [bytes(row[:n]).decode() for row, n in zip(chars, lengths, strict=True)]
    assert texts == [str(v) for v in values]


@given(st.lists(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1),
                             timezones=st.just(UTC)), min_size=1, max_size=20))
def test_format_ts_matches_isoformat(stamps):
    out = format_ts(np.array([epoch_us(s) for s in stamps], dtype=np.int64))
    texts = [bytes(row).decode() for row in out]
    assert texts == [s.strftime("%Y-%m-%dT%H:%M:%S.%fZ") for s in stamps]


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"rate": -1}, "rate"), ({"fmt": "xml"}, "format"), ({"batch_interval_s": 0}, "batch_interval"),
])
def test_bad_config_is_refused_by_name(tmp_path, kwargs, field):
    with pytest.raises(ConfigError, match=field):
        GeneratorConfig(tmp_path, **kwargs)


# ---- keyed traffic (--keys): a pool of keys, each in bursts and pauses --------------------

def _keyed_run(tmp_path, seed=3, keys: int | None = 20, seconds=120):
    """Two minutes of events at 200/s in 0.2 s batches, on a pinned timeline."""
    gen = EventGenerator(GeneratorConfig(tmp_path, fmt="parquet", seed=seed, keys=keys,
                                         burst_s=5, pause_s=20))
    per_batch = 40
    rows = []
    for i in range(seconds * 5):
        start = T0 + timedelta(seconds=i * 0.2)
        batch = gen.write_batch(per_batch, start, start + timedelta(seconds=0.2))
        rows += _rows(batch.path, "parquet")
    return gen, rows


def test_keys_come_from_a_pool_of_exactly_n(tmp_path):
    gen, rows = _keyed_run(tmp_path)
    seen = {u for u, _, _ in rows}
    assert len(seen) == 20 and all(UUID4.match(u) for u in seen)
    assert {bytes(r).decode() for r in gen.pool.uuids} == seen


def test_each_key_has_bursts_and_pauses_so_sessions_form(tmp_path):
    """Within a burst a key's events are a fraction of a second apart; between bursts it is
    silent for at least half the mean pause (pauses are 10-30 s)."""
    _, rows = _keyed_run(tmp_path)
    gaps = []
    by_key: dict[str, list[datetime]] = {}
    for u, _, ts in rows:
        by_key.setdefault(u, []).append(ts)
    for times in by_key.values():
        times.sort()
        gaps += [(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)]
    gaps_arr = np.array(gaps)
    assert np.median(gaps_arr) < 1.0
    long_ = gaps_arr[gaps_arr > 2.0]
    assert len(long_) >= 20 and long_.min() >= 8.0  # a pause: 10 s at least, less a burst edge


@pytest.mark.slow
def test_keyed_traffic_keeps_the_rate_and_is_reproducible(tmp_path):
    gen, rows = _keyed_run(tmp_path / "a")
    assert len(rows) == 120 * 200
    plain, _ = _keyed_run(tmp_path / "plain", keys=None)  # a fresh uuid per event
    assert gen.stats.written_per_second == plain.stats.written_per_second
    _, again = _keyed_run(tmp_path / "b")
    assert [u for u, _, _ in again] == [u for u, _, _ in rows]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"keys": -1}, "--keys -1 must be from 0 to"),
    ({"keys": 0}, None),
    ({"keys": 10}, None),
    ({"keys": 10, "burst_s": 0}, "--burst 0s must be more than 0"),
    ({"keys": 10, "pause_s": 7200}, "--pause 7200s must be more than 0 and at most 1h"),
])
def test_keyed_options_are_checked_by_name(tmp_path, kwargs, message):
    if message is None:
        GeneratorConfig(tmp_path, **kwargs)
        return
    with pytest.raises(ConfigError, match=message):
        GeneratorConfig(tmp_path, **kwargs)
