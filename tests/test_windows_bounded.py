"""Every window request is bounded: its work (buckets read + windows returned) is estimated from
the request alone and refused above the limit before anything is read, in one line naming the
fix -- which, taken, is accepted; statement_timeout stops what still runs too long, in words of
its own; and big answers stream through a server-side cursor.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

import psycopg
import pytest
from click.testing import CliRunner

from slidewin.client.cli import cli
from slidewin.db import key_windows, streams, windows
from slidewin.db.errors import ProcedureError, WindowTimeout
from slidewin.db.streams import Column
from tests import store_fixtures
from tests.store_fixtures import at, put

small_store_dsn = store_fixtures.small_store_dsn
sconn = store_fixtures.sconn

S = timedelta(seconds=1)
H = timedelta(hours=1)
D = timedelta(days=1)
LIMIT = 1_000_000


def work(conn: psycopg.Connection, size: int, adv: int, n: int, grains: str = "1,10,60,3600"
         ) -> int:
    row = conn.execute(f"SELECT slidewin.window_work(%s, %s, %s, '{{{grains}}}')",
                       (size, adv, n)).fetchone()
    assert row is not None
    return int(row[0])


def test_the_work_estimate_counts_what_the_series_reads(sconn):
    # tumbling 10 s over an hour: 360 buckets of the 10 s grain, 360 windows
    assert work(sconn, 10, 10, 360) == 361 + 360
    # a week every second over a day: the seconds around the starts (a day's), their 10 s
    # buckets and minutes, the hours between -- never the week's 604,800 seconds
    week = work(sconn, 604800, 1, 86400)
    assert 86400 + 2 * 86400 < week < 86400 + 691200
    # count windows: the events read and the windows
    assert work(sconn, 1000, 1, 99001, "1") == 100000 + 1 + 99001
    # a key's windows read its events per gcd(size, advance): at most the span's buckets
    assert work(sconn, 60, 10, 360, "10") == 3650 // 10 + 1 + 360


def test_too_much_work_is_refused_before_anything_is_read_naming_the_fix(sconn):
    put(sconn, [("a", 1, at(0)), ("b", 2, at(3600))])
    start = at(0)
    end = start + timedelta(days=4000)  # 96,000 windows of 3601 s every hour: cut everywhere
    with pytest.raises(ProcedureError) as refused:
        windows.hopping(sconn, 3601 * S, H, start, end)
    text = str(refused.value)
    assert text.startswith("hopping windows of 3601s every 3600s would read about ")
    assert "more work than the limit of 1000000 (slidewin.max_window_work)" in text
    fit = int(re.search(r"--limit (\d+)", text).group(1))  # type: ignore[union-attr]
    assert f"at most {fit} windows, {fit * 3600}s" in text and "larger advance" in text
    # the fix works: that many windows are accepted, one more is not
    assert work(sconn, 3601, 3600, fit) <= LIMIT < work(sconn, 3601, 3600, fit + 1)
    found = windows.hopping(sconn, 3601 * S, H, start, start + fit * H)
    assert [(w.start, w.n) for w in found] == [(at(0), 2), (at(3600), 1)]
    # a session may allow more (or less)
    sconn.execute("SET slidewin.max_window_work = 100")
    with pytest.raises(ProcedureError, match="limit of 100 "):
        windows.hopping(sconn, 60 * S, 10 * S, at(0), at(3600))
    sconn.execute("RESET slidewin.max_window_work")


def test_count_windows_and_lookups_name_their_own_fix(sconn):
    with pytest.raises(ProcedureError) as refused:
        windows.count_windows(sconn, 1000, 1, 1_000_000)
    text = str(refused.value)
    assert "would read about 1000001 events and return 999001 windows" in text
    rows, limit = map(int, re.search(r"use at most (\d+) rows \(--limit (\d+) windows\)",
                                     text).groups())  # type: ignore[union-attr]
    assert rows == 1000 + limit - 1
    assert windows.count_windows(sconn, 1000, 1, rows) == []
    # one window, however long, reads the rollups and one second's events
    assert windows.count_windows(sconn, 1_000_000) == []
    with pytest.raises(ProcedureError, match="holding one time .*use a larger advance"):
        windows.windows_at(sconn, 7 * D, S, at(0))
    with pytest.raises(ProcedureError, match="for one key .*use a larger advance"):
        key_windows.windows_at(sconn, "a", 7 * D, S, at(0))


def test_a_statement_timeout_says_which_function_and_the_fix(sconn):
    put(sconn, [("a", 1, at(0))])
    sconn.execute("SET statement_timeout = '30ms'")
    try:
        # 86,400 windows over two days of seconds: well under the work limit, not under 30 ms
        with pytest.raises(psycopg.errors.QueryCanceled) as stopped:
            sconn.execute("SELECT count(*) FROM slidewin.windows_at('1 day', '1 s', %s)",
                          (at(0),))
        diag = stopped.value.diag
        assert diag.message_primary == ("slidewin.windows_at ran longer than statement_timeout "
                                        "(30ms) and was cancelled")
        assert "a shorter range, a larger advance or fewer rows" in (diag.message_hint or "")
        # through the Python API: WindowTimeout, one line with the fix
        with pytest.raises(WindowTimeout, match=r"slidewin.hopping ran longer than "
                           r"statement_timeout \(30ms\).*\(ask for less"), \
                windows.open_series(sconn, "hopping", D, at(-86400), at(0), S) as found:
            list(found)
    finally:
        sconn.execute("RESET statement_timeout")
    # the session goes on as before
    assert sconn.execute("SELECT count(*) FROM slidewin.hopping('1 min', '10 s', %s, %s)",
                         (at(0), at(60))).fetchone() == (1,)


def test_streamed_series_equal_the_lists_and_count_without_keeping_rows(sconn):
    put(sconn, [(f"k{i % 7}", i, at(i * 0.7)) for i in range(400)])
    cases = [("tumbling", 10 * S, None), ("hopping", 30 * S, 5 * S), ("sliding", 4 * S, None)]
    for kind, size, adv in cases:
        want = getattr(windows, kind)(sconn, *((size, adv) if adv else (size,)), at(-30),
                                      at(300))
        with windows.open_series(sconn, kind, size, at(-30), at(300), adv, timeout=None) as got:
            assert got.count() == len(want) > 0
            assert list(got) == want
        keyed = getattr(key_windows, kind)(sconn, "k3", *((size, adv) if adv else (size,)),
                                           at(-30), at(300))
        with key_windows.open_series(sconn, "k3", kind, size, at(-30), at(300), adv) as got:
            assert list(got) == keyed
    with windows.open_count_windows(sconn, 50, 7, 400) as got:
        first = list(got)
    assert first == windows.count_windows(sconn, 50, 7, 400)
    # a refusal comes before any row, as ProcedureError
    with pytest.raises(ProcedureError, match="advance 20s is larger than size 10s"), \
            windows.open_series(sconn, "hopping", 10 * S, at(0), at(60), 20 * S):
        pass


def test_a_declared_streams_series_stream_too(sconn):
    streams.define(sconn, "readings", key="k", time="ts", measures=["v"],
                   columns=[Column("k", "text"), Column("v", "double precision")])
    sconn.execute("INSERT INTO slidewin_streams.readings (k, ts, v) SELECT 'k' || (i %% 3), "
                  "%s + i * interval '0.5 s', i / 4.0 FROM generate_series(0, 300) i", (at(0),))
    for kind, adv in (("hopping", 5 * S), ("sliding", None)):
        want = streams.windows(sconn, "readings", kind, size=20 * S, advance=adv, start=at(0),
                               end=at(150))
        with streams.open_windows(sconn, "readings", kind, size=20 * S, advance=adv,
                                  start=at(0), end=at(150)) as got:
            assert got.count() == len(want) > 0 and list(got) == want
    with streams.open_count_windows(sconn, "readings", 40, 10, 200) as got:
        assert list(got) == streams.count_windows(sconn, "readings", 40, 10, 200)
    with pytest.raises(ProcedureError, match="would read about"):
        streams.count_windows(sconn, "readings", 1000, 1, 1_000_000)


@pytest.fixture
def runner(sconn, small_store_dsn, monkeypatch):
    monkeypatch.setenv("SLIDEWIN_DSN", small_store_dsn)
    put(sconn, [(f"k{i % 5}", i, at(i)) for i in range(120)])
    return CliRunner()


def test_the_cli_names_the_fix_and_limit_cuts_the_range(runner):
    far = (at(0) + timedelta(days=4000)).isoformat()
    refused = runner.invoke(cli, ["windows", "hopping", "--size", "3601s", "--advance", "1h",
                                  "--from", at(0).isoformat(), "--to", far])
    assert refused.exit_code == 2
    line = refused.output.strip()
    assert line.startswith("error: hopping windows of 3601s every 3600s would read about")
    assert "or use a larger --advance" in line and len(line.splitlines()) == 1
    fit = re.search(r"--limit (\d+)", line).group(1)  # type: ignore[union-attr]
    taken = runner.invoke(cli, ["windows", "hopping", "--size", "3601s", "--advance", "1h",
                                "--from", at(0).isoformat(), "--to", far, "--limit", fit,
                                "--json"])
    assert taken.exit_code == 0, taken.output
    doc = json.loads(taken.stdout)
    assert doc["limit"] == int(fit) and len(doc["windows"]) == 1
    # --limit N: the first N windows
    doc = json.loads(runner.invoke(cli, ["windows", "tumbling", "--size", "10s", "--from",
                                         at(0).isoformat(), "--to", at(120).isoformat(),
                                         "--limit", "3", "--json"]).stdout)
    assert [w["start"][11:19] for w in doc["windows"]] == ["12:00:00", "12:00:10", "12:00:20"]
    assert doc["to"][11:19] == "12:00:30"
    text = runner.invoke(cli, ["windows", "sliding", "--size", "5s", "--from",
                               at(0).isoformat(), "--to", at(120).isoformat(), "--limit", "4"])
    assert text.exit_code == 0 and "; 4 windows" in text.output.splitlines()[0]
    rows = runner.invoke(cli, ["windows", "rows", "--size", "10", "--advance", "1", "--rows",
                               "100", "--limit", "5", "--json"])
    doc = json.loads(rows.stdout)
    assert (doc["rows"], [w["number"] for w in doc["windows"]]) == (14, [1, 2, 3, 4, 5])
    refused = runner.invoke(cli, ["windows", "rows", "--size", "1k", "--advance", "1", "--rows",
                                  "1M"])
    assert refused.exit_code == 2
    assert "use at most" in refused.output and "--rows (--limit" in refused.output
    both = runner.invoke(cli, ["windows", "tumbling", "--size", "10s", "--limit", "3",
                               "--follow"])
    assert both.exit_code == 2 and "--limit and --follow" in both.output
