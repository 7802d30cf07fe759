"""The reporter, the store watch, the freshness tracker and the final summary, on a real store
with a pinned clock.

Timeline of the loaded store (seconds relative to T0 = 12:00:00; the clock is pinned at T0+0.5).
The second holding the newest events (T0) is still being ingested, so the reports cover the
complete seconds before it -- up to the watermark instead when the ingest has recorded one:

    -20        -3     -0.5    0  0.5
     |          |       |     |   |
    1000       100      40  10,20 now     1 s  [-1, 0): {40}             -> 40.0
                                           5 s  [-5, 0): {+100}           -> 70.0
                                           30 s [-30, 0): {+1000}         -> 380.0
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from slidewin.client.sim.freshness import (
    FreshnessTracker,
    Sample,
    latency_stats,
    weighted_percentile,
)
from slidewin.client.sim.generator import Batch, GeneratorStats, epoch_us
from slidewin.client.sim.reporter import Failures, Reporter, StoreWatch, Totals, format_report
from slidewin.client.sim.summary import build_summary, format_summary
from slidewin.db.events import Event, insert_events
from slidewin.db.retention import nibble
from tests.conftest import T0

NOW = T0 + timedelta(seconds=0.5)


def at(seconds: float):
    return T0 + timedelta(seconds=seconds)


def load(conn: psycopg.Connection) -> None:
    events = [Event("a", 10, at(0.1)), Event("b", 20, at(0.2)), Event("c", 100, at(-3)),
              Event("d", 1000, at(-20))]
    assert insert_events(conn, events, 8) == 4


def load_with_last_second(conn: psycopg.Connection) -> None:
    """``load`` plus e=40 at -0.5 s: the last complete second holds an event."""
    load(conn)
    assert insert_events(conn, [Event("e", 40, at(-0.5))], 8) == 1


@pytest.fixture
def watch_conn(conn, store_dsn):
    with psycopg.connect(store_dsn, autocommit=True) as c:
        yield c


def make_reporter(conn, watch_conn, gen=None, fresh=None):
    return Reporter(conn, StoreWatch(watch_conn), gen or GeneratorStats(),
                    fresh or FreshnessTracker(clock=lambda: NOW), Failures(), clock=lambda: NOW)


def test_empty_store_says_no_data_never_none(conn, watch_conn):
    lines = format_report(make_reporter(conn, watch_conn).report())
    text = "\n".join(lines)
    assert text.count("no data") >= 4 + 2  # four windows, freshness avg and p95
    assert "None" not in text
    assert lines[0].endswith("Report:")


def test_loaded_store_reports_the_last_complete_seconds(conn, watch_conn):
    load_with_last_second(conn)
    report = make_reporter(conn, watch_conn).report()
    assert report.averages[1] == pytest.approx(40.0)
    assert report.averages[5] == pytest.approx(70.0)
    assert report.averages[10] == pytest.approx(70.0)
    assert report.averages[30] == pytest.approx(380.0)
    assert report.rows_in_window == {1: 1, 5: 2, 10: 2, 30: 3}
    assert (report.window_end, report.window_final) == (T0, False)
    text = "\n".join(format_report(report))
    assert "Average for past  1s: 40.0 (11:59:59-12:00:00 UTC, 1 rows)" in text
    assert "Average for past 30s: 380.0 (11:59:30-12:00:00 UTC, 3 rows)" in text
    assert "no data" not in text.split("Insert")[0]  # every window line carries a number
    assert "stored 5" in text


def test_with_a_watermark_the_reports_cover_final_seconds(conn, watch_conn):
    load_with_last_second(conn)
    # the ingest's newest event at T0+0.2 with grace 2 s: complete up to T0-1.8
    conn.execute("INSERT INTO slidewin.stream_state (stream, newest_ts, grace, watermark) "
                 "VALUES ('events', %s, '2 s', %s)", (at(0.2), at(-1.8)))
    report = make_reporter(conn, watch_conn).report()
    assert (report.window_end, report.window_final) == (at(-2), True)
    assert report.averages[1] == pytest.approx(100.0)  # [-3, -2): {100}
    assert report.averages[5] == pytest.approx(100.0)  # [-7, -2): {100}
    text = "\n".join(format_report(report))
    assert "Average for past  5s: 100.0 (11:59:53-11:59:58 UTC, final, 1 rows)" in text


def _batch_marker(conn, batch_id: int, accepted: int) -> None:
    conn.execute(
        "INSERT INTO slidewin.ingest_batches (query_id, batch_id, rows_in, accepted) "
        "VALUES ('t', %s, %s, %s)", (batch_id, accepted, accepted))


def _dead_letter(conn, reason: str) -> None:
    conn.execute("INSERT INTO slidewin.dead_letters (source, reason, raw, stream) "
                 "VALUES ('t', %s, 'x', 'events')", (reason,))


def test_watch_counts_ingested_rejected_and_deleted_since_it_began(conn, watch_conn):
    load(conn)
    _batch_marker(conn, 0, 4)  # before the watch: not counted
    _dead_letter(conn, "late")
    watch = StoreWatch(watch_conn)
    assert watch.totals.rows == 4
    insert_events(conn, [Event("e", 5, at(0.3)), Event("f", 6, at(0.4))], 8)
    _batch_marker(conn, 1, 2)
    for reason in ("late", "late", "malformed"):
        _dead_letter(conn, reason)
    deleted = sum(nibble(conn, p, at(-10), None, 100) for p in range(8))
    assert deleted == 1  # the row at -20 s
    totals = watch.refresh()
    assert (totals.ingested, totals.deleted, totals.rows) == (2, 1, 5)
    assert totals.rejected == 3
    assert dict(totals.rejected_by_reason) == {"late": 2, "malformed": 1}
    again = watch.refresh()  # nothing new: nothing counted twice
    assert (again.ingested, again.deleted, again.rejected) == (2, 1, 3)


def test_report_shows_deltas_since_the_previous_report(conn, watch_conn):
    reporter = make_reporter(conn, watch_conn)
    reporter.report()
    load(conn)
    _batch_marker(conn, 7, 4)
    _dead_letter(conn, "bad_ts")
    second = reporter.report()
    assert (second.deleted, second.rejected, second.rows) == (0, 1, 4)
    assert second.ingested_per_s > 0
    third = reporter.report()
    assert (third.rejected, third.ingested_per_s) == (0, 0)


# ---- freshness ------------------------------------------------------------------------------

def batch(start_s: float, end_s: float, seconds: dict[int, int]) -> Batch:
    base = epoch_us(T0) // 1_000_000
    return Batch(Path("x"), sum(seconds.values()), at(start_s), at(end_s),
                 {base + k: v for k, v in seconds.items()})


def sec(k: int) -> int:
    return epoch_us(T0) // 1_000_000 + k


def test_a_batch_is_visible_when_every_second_reaches_its_cumulative_target():
    fresh = FreshnessTracker(clock=lambda: NOW)
    fresh.add_batch(batch(0.0, 0.8, {0: 80}))
    fresh.add_batch(batch(0.8, 1.2, {0: 20, 1: 20}))  # second 0 must reach 100, not 20
    assert fresh.observe({sec(0): 79}, at(1.0)) == 0
    assert fresh.observe({sec(0): 90, sec(1): 20}, at(1.5)) == 1  # first batch only
    assert fresh.samples[0].latency_s == pytest.approx(1.5 - 0.4)
    assert fresh.observe({sec(0): 100, sec(1): 20}, at(2.0)) == 1
    assert fresh.samples[1].latency_s == pytest.approx(2.0 - 1.0)
    assert fresh.pending_events == 0
    stats = latency_stats(fresh.take_new())
    assert stats.events == 120
    assert stats.avg_ms == pytest.approx((80 * 1100 + 40 * 1000) / 120)


def test_a_batch_that_never_shows_up_is_unmeasured_not_a_latency():
    fresh = FreshnessTracker(clock=lambda: NOW, give_up_s=30)
    fresh.add_batch(batch(0.0, 1.0, {0: 50}))
    assert fresh.observe({}, at(20)) == 0 and fresh.pending_events == 50
    assert fresh.observe({}, at(31.5)) == 0
    assert fresh.unmeasured_events == 50 and fresh.pending_events == 0
    assert fresh.overall().events == 0


def test_weighted_percentiles_are_over_events():
    samples = [Sample(T0, 1.0, 90), Sample(T0, 10.0, 10)]
    assert weighted_percentile(samples, 0.5) == 1.0
    assert weighted_percentile(samples, 0.9) == 1.0
    assert weighted_percentile(samples, 0.95) == 10.0
    assert weighted_percentile([], 0.5) is None


def test_poll_reads_the_rollups_of_pending_seconds(conn):
    fresh = FreshnessTracker(clock=lambda: at(3))
    fresh.add_batch(batch(0.0, 1.0, {0: 2}))
    assert fresh.poll(conn) == 0
    insert_events(conn, [Event("p", 1, at(0.2)), Event("q", 2, at(0.9))], 8)
    assert fresh.poll(conn) == 1
    assert fresh.samples[0].latency_s == pytest.approx(2.5)


# ---- summary --------------------------------------------------------------------------------

def test_summary_has_per_partition_rows_and_oldest_age(conn, watch_conn):
    load(conn)
    watch = StoreWatch(watch_conn)
    _dead_letter(conn, "late")
    totals = watch.refresh()
    summary = build_summary(
        conn=conn, now=NOW, duration_s=20, measured_s=15, written=(1000, 750),
        totals=totals, at_warmup=Totals(), failures=(0, ""),
        freshness=latency_stats([Sample(T0, 0.25, 10)]), unmeasured=0, pending=0,
    )
    assert summary.retained == 4 and len(summary.partitions) == 8
    ages = sorted(p.oldest_age_s for p in summary.partitions if p.oldest_age_s is not None)
    assert ages[-1] == pytest.approx(20.5)
    assert summary.rejected_by_reason == {"late": 1}
    assert summary.written_per_s == pytest.approx(50.0)
    text = "\n".join(format_summary(summary))
    assert "Rows retained 4" in text and "late: 1" in text and "p95 250" in text
    assert "None" not in text
    assert summary.as_json()["retained"] == 4


# ---- session windows ------------------------------------------------------------------------

def test_reports_and_summary_show_each_session_window(conn, watch_conn):
    """Open sessions, merges, late events and the longest session; an event late only for the
    session window is stored, so the watch does not count it as rejected."""
    from slidewin.db import sessions

    sessions.define(conn, sessions.SessionDef("visits", timedelta(seconds=5),
                                              timedelta(seconds=30), timedelta(hours=1)))
    watch = StoreWatch(watch_conn)
    reporter = Reporter(conn, watch, GeneratorStats(), FreshnessTracker(clock=lambda: NOW),
                        Failures(), clock=lambda: NOW)
    # a: [-20 .. -17] and [-9]; then -13 bridges them; b: one event at 0.1
    insert_events(conn, [Event("a", 1, at(-20)), Event("a", 1, at(-17)), Event("a", 1, at(-9)),
                         Event("b", 1, at(0.1))], 8)
    insert_events(conn, [Event("a", 1, at(-13))], 8)
    insert_events(conn, [Event("b", 1, at(-40))], 8)  # close 0.1 - 35: late for visits
    text = "\n".join(format_report(reporter.report()))
    assert "Sessions visits: 2 open, 1 merges, 1 late, longest 11.0 s (key a)" in text
    assert watch.totals.rejected == 0
    summary = build_summary(
        conn=conn, now=NOW, duration_s=20, measured_s=15, written=(6, 6),
        totals=watch.totals, at_warmup=Totals(), failures=(0, ""),
        freshness=latency_stats([]), unmeasured=0, pending=0,
    )
    assert "Sessions visits: 2 open, 1 merges, 1 late, longest 11.0 s (key a)" in "\n".join(
        format_summary(summary))
    assert summary.as_json()["sessions"] == [
        {"name": "visits", "open": 2, "merges": 1, "late": 1, "longest_s": 11.0,
         "longest_key": "a"}]
