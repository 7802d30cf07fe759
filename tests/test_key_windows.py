"""Time windows of one key (``slidewin.key_window``, ``db.key_windows``), on a drawn timeline
and against a brute force over the raw rows, with and without the key index.

    t (s after T0)    0     3     9.5   10    12    25
    key a             1           3           5
    key b                   2           4           6     (b must never count for a)
    10 s tumbling for a: [0,10): 1+3 (n 2)   [10,20): 5
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slidewin.client.cli import cli
from slidewin.db import key_windows, windows
from slidewin.db.errors import ProcedureError
from tests import store_fixtures
from tests.conftest import T0, clean_connection
from tests.store_fixtures import at, put

small_store_dsn = store_fixtures.small_store_dsn
sconn = store_fixtures.sconn
S = timedelta(seconds=1)
EVENTS = [("a", 1, at(0)), ("b", 2, at(3)), ("a", 3, at(9.5)), ("b", 4, at(10)),
          ("a", 5, at(12)), ("b", 6, at(25))]


@pytest.fixture(params=[False, True], ids=["no-index", "index"])
def kconn(sconn, request):
    key_windows.set_index(sconn, request.param)
    put(sconn, EVENTS)
    yield sconn
    key_windows.set_index(sconn, False)


def table(found):
    return [((w.start - T0) / S, (w.end - T0) / S, w.n, int(w.total)) for w in found]


def test_tumbling_hopping_and_sliding_count_the_key_alone(kconn):
    assert table(key_windows.tumbling(kconn, "a", 10 * S, at(0), at(30))) == [
        (0, 10, 2, 4), (10, 20, 1, 5)]
    assert table(key_windows.hopping(kconn, "a", 10 * S, 5 * S, at(0), at(30))) == [
        (0, 10, 2, 4), (5, 15, 2, 8), (10, 20, 1, 5)]
    # sliding: per second t holding a's events, seconds t-3 .. t, both ends in
    assert table(key_windows.sliding(kconn, "a", 3 * S, at(0), at(30))) == [
        (-3, 0, 1, 1), (6, 9, 1, 3), (9, 12, 2, 8)]
    assert table(key_windows.tumbling(kconn, "b", 10 * S, at(0), at(30))) == [
        (0, 10, 1, 2), (10, 20, 1, 4), (20, 30, 1, 6)]


def test_faust_lookups_for_one_key(kconn):
    found = key_windows.windows_at(kconn, "a", 10 * S, 5 * S, at(12))
    assert table(found) == [(5, 15, 2, 8), (10, 20, 1, 5)]
    assert table([key_windows.current(kconn, "a", 10 * S, 10 * S, at(12), delta=10 * S)]) == [
        (0, 10, 2, 4)]
    empty = key_windows.current(kconn, "nobody", 10 * S, 10 * S, at(12))
    assert (empty.n, empty.total) == (0, None)


def test_a_key_without_events_and_bad_input(kconn):
    assert key_windows.tumbling(kconn, "nobody", 10 * S, at(0), at(30)) == []
    with pytest.raises(ProcedureError, match="key must be 1 to 200 characters"):
        key_windows.tumbling(kconn, "", 10 * S, at(0), at(30))
    with pytest.raises(ProcedureError, match="advance"):
        key_windows.hopping(kconn, "a", 10 * S, 20 * S, at(0), at(30))


def test_count_windows_of_one_key_are_its_newest_events(kconn):
    """a's events newest first: 5 (12 s), 3 (9.5 s), 1 (0 s); b's never count. Without the key
    index a key's newest events could only be found by reading the whole table: refused,
    naming the fix."""
    if not key_windows.set_index(kconn, None):
        with pytest.raises(ProcedureError, match="key-index enable"):
            windows.count_windows(kconn, 2, 1, 3, key="a")
        return

    def rows(found):
        return [(w.number, (w.start - T0) / S, (w.end - T0) / S, w.n, int(w.total), w.vmin,
                 w.vmax) for w in found]

    assert rows(windows.count_windows(kconn, 2, 1, 3, key="a")) == [
        (1, 9.5, 12, 2, 8, 3, 5), (2, 0, 9.5, 2, 4, 1, 3)]
    assert rows(windows.count_windows(kconn, 2, key="a")) == [(1, 9.5, 12, 2, 8, 3, 5)]
    # fewer events than the window: all of them, one short window (as without a key)
    assert rows(windows.count_windows(kconn, 5, key="b")) == [(1, 3, 25, 3, 12, 2, 6)]
    assert rows(windows.count_windows(kconn, 2, 2, 6, key="b")) == [
        (1, 10, 25, 2, 10, 4, 6), (2, 3, 3, 1, 2, 2, 2)]
    assert windows.count_windows(kconn, 2, key="nobody") == []
    with pytest.raises(ProcedureError, match="key must be 1 to 200 characters"):
        windows.count_windows(kconn, 2, key="")


def test_count_windows_of_one_key_read_its_newest_rows_through_the_key_index(sconn):
    """20,000 events of 50 keys: with the key index a key's count windows read that key's newest
    rows alone (the index's tuples, no partition read whole, not its primary key)."""
    sconn.execute("INSERT INTO slidewin.events (part, uuid, val, ts) "
                  "SELECT slidewin.partition_of('k' || (g %% 50)), 'k' || (g %% 50), g, "
                  "%s + g * interval '0.1 s' FROM generate_series(0, 19999) g", (at(0),))
    key_windows.set_index(sconn, True)
    sconn.execute("ANALYZE slidewin.events")
    before = event_counters(sconn)
    got = windows.count_windows(sconn, 10, 5, 100, key="k7")
    assert [(w.number, w.n, int(w.total)) for w in got[:2]] == [
        (1, 10, sum(19957 - 50 * i for i in range(10))),
        (2, 10, sum(19707 - 50 * i for i in range(10)))]
    assert len(got) == 19
    read = {name: n - before[name] for name, n in event_counters(sconn).items()
            if n > before[name]}
    key_windows.set_index(sconn, False)
    assert read and all(name.startswith("tuples ") and "uuid_ts" in name for name in read), read
    assert sum(read.values()) <= 100 + store_fixtures.PARTS, read


def event_counters(conn):
    """Per partition of events: how often it was read whole, and the tuples each of its indexes
    gave (the server's counters, flushed to be read at once: PostgreSQL 15+)."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT pg_stat_clear_snapshot()")
    return {name: int(n) for name, n in conn.execute(
        "SELECT 'seq ' || relname, seq_scan FROM pg_stat_user_tables "
        " WHERE schemaname = 'slidewin' AND relname LIKE 'events_p%%' "
        "UNION ALL SELECT 'tuples ' || indexrelname, idx_tup_read FROM pg_stat_user_indexes "
        " WHERE schemaname = 'slidewin' AND relname LIKE 'events_p%%'").fetchall()}


def test_the_index_is_used_once_enabled(sconn):
    assert key_windows.set_index(sconn, None) is False
    assert key_windows.set_index(sconn, True) is True
    sconn.execute("SET enable_seqscan = off")  # a 6-row table: make the planner show its path
    plan = "\n".join(r[0] for r in sconn.execute(
        "EXPLAIN SELECT * FROM slidewin.events WHERE uuid = 'a' AND ts >= %s AND ts < %s",
        (at(0), at(30))).fetchall())
    sconn.execute("RESET enable_seqscan")
    assert plan.count("uuid_ts_val_idx") == 3 and "Index Cond: ((uuid = 'a'::text)" in plan, plan
    assert key_windows.set_index(sconn, False) is False


def test_cli_key_option_and_key_index(sconn, small_store_dsn, monkeypatch):
    monkeypatch.setenv("SLIDEWIN_DSN", small_store_dsn)
    put(sconn, EVENTS)
    runner = CliRunner()
    result = runner.invoke(cli, ["windows", "tumbling", "--size", "10s", "--key", "a", "--from",
                                 T0.isoformat(), "--to", at(30).isoformat(), "--json"])
    assert result.exit_code == 0, result.output
    import json

    doc = json.loads(result.stdout.strip().splitlines()[-1])
    assert doc["key"] == "a" and [w["n"] for w in doc["windows"]] == [2, 1]
    rows = ["windows", "rows", "--size", "2", "--rows", "3", "--advance", "1", "--key", "a",
            "--json"]
    refused = runner.invoke(cli, rows)  # a key's newest events need the key index
    assert refused.exit_code == 2 and "key-index enable" in refused.output, refused.output
    on = runner.invoke(cli, ["windows", "key-index", "enable", "--json"])
    assert on.exit_code == 0 and json.loads(on.stdout) == {"key_index": True}
    counted = runner.invoke(cli, rows)
    assert counted.exit_code == 0, counted.output
    body = json.loads(counted.stdout)
    assert body["key"] == "a" and [(w["n"], w["sum"]) for w in body["windows"]] == [(2, 8), (2, 4)]
    assert "key index on" in runner.invoke(cli, ["windows", "key-index"]).output
    assert runner.invoke(cli, ["windows", "key-index", "disable"]).exit_code == 0
    bad = runner.invoke(cli, ["windows", "sliding", "--size", "3s", "--key", "", "--last", "1m"])
    assert bad.exit_code == 2 and "--key must be 1 to 200 characters" in bad.output


# ---- against a brute force ----------------------------------------------------------------

def brute(rows, key, size_s, adv_s, start_s, end_s):
    """Hopping windows (start multiple of adv, in [start, end)) of key's rows, n and sum."""
    out = {}
    for k, v, t in rows:
        if k != key:
            continue
        ws = (t // adv_s) * adv_s
        while ws > t - size_s:
            if start_s <= ws < end_s:
                n, total = out.get(ws, (0, 0))
                out[ws] = (n + 1, total + v)
            ws -= adv_s
    return sorted((ws, n, total) for ws, (n, total) in out.items())


events = st.lists(st.tuples(st.sampled_from("abc"), st.integers(-50, 50),
                            st.integers(0, 400).map(lambda q: q / 4)), max_size=40)


@pytest.mark.slow
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=events, size_s=st.sampled_from([5, 10, 30]), adv_div=st.sampled_from([1, 5]),
       index=st.booleans())
def test_key_windows_equal_a_brute_force(small_store_dsn, rows, size_s, adv_div, index):
    adv_s = size_s // adv_div
    with clean_connection(small_store_dsn) as conn:
        key_windows.set_index(conn, index)
        put(conn, [(k, v, at(t)) for k, v, t in rows])
        stored = [(k, v, (t - T0).total_seconds())
                  for k, v, t in conn.execute("SELECT uuid, val, ts FROM slidewin.events")]
        got = [((w.start - T0).total_seconds(), w.n, w.total)
               for w in key_windows.hopping(conn, "a", size_s * S, adv_s * S, at(0), at(100))]
        assert got == [(ws, n, Decimal(total)) for ws, n, total in
                       brute(stored, "a", size_s, adv_s, 0, 100)]
        # all keys together are the store-wide windows
        every = {}
        for key in "abc":
            for w in key_windows.hopping(conn, key, size_s * S, adv_s * S, at(0), at(100)):
                n, total = every.get(w.start, (0, 0))
                every[w.start] = (n + w.n, total + w.total)
        whole = {w.start: (w.n, w.total)
                 for w in windows.hopping(conn, size_s * S, adv_s * S, at(0), at(100))}
        assert every == whole
        key_windows.set_index(conn, False)
