"""Every duration a stream, join, session window or retention policy takes is bounded when it is
defined: 0 .. 100 years (db.limits.MAX_DURATION, SQL slidewin.check_duration), 0 refused where
it means nothing. Each option gets its extremes -- 0, 1 us, 100 years, 10,000 years, negative,
absent -- through the library (and the SQL a psql user calls), and every accepted value then
takes a batch: the outcome is a refusal naming the option and the limit, or a store that works.

Before this, ``joins add ... --within 3650000d`` was accepted and every later insert into
either stream failed with "timestamp out of range".
"""

from __future__ import annotations

import re
from datetime import timedelta

import psycopg
import pytest
from click.testing import CliRunner

from slidewin.client.cli import cli
from slidewin.db import joins, sessions, streams, windows
from slidewin.db.errors import ConfigError, ProcedureError
from slidewin.db.events import Event, insert_events
from slidewin.db.limits import (
    MAX_DURATION,
    MAX_DURATION_TEXT,
    MAX_WINDOW_EVENTS,
    check_duration,
)
from slidewin.db.retention_settings import RetentionSettings, upsert_settings
from slidewin.db.streams import Column
from slidewin.db.units import parse_duration
from slidewin.jobs.config import RetentionPolicy
from tests import store_fixtures
from tests.store_fixtures import PARTS, at

small_store_dsn = store_fixtures.small_store_dsn
sconn = store_fixtures.sconn

US = timedelta(microseconds=1)
YEARS_100 = MAX_DURATION
YEARS_10K = timedelta(days=3_650_000)
NEG = timedelta(seconds=-1)
NOW = at(1000)
LIMIT = "longer than the limit of 100 years (36500d)"

# (value, what happens): "ok" works; otherwise a piece of the one-line refusal
EXTREMES = [
    pytest.param(timedelta(0), "zero", id="0"),
    pytest.param(US, "ok", id="1us"),
    pytest.param(YEARS_100, "ok", id="100y"),
    pytest.param(YEARS_10K, LIMIT, id="10000y"),
    pytest.param(NEG, "0 or more", id="negative"),
    pytest.param(None, "ok", id="absent"),
]


def _outcome(expect: str, zero: str) -> str:
    return zero if expect == "zero" else expect


def _declare(conn: psycopg.Connection, name: str, **kw: object) -> streams.Stream:
    return streams.define(conn, name, key="id", time="ts",
                          columns=[Column("id", "bigint"), Column("k", "bigint"),
                                   Column("v", "double precision")], measures=["v"], **kw)


def _batch(conn: psycopg.Connection, stream: str, rows: list[tuple[int, int, float]]) -> None:
    """What the ingest commits for one batch: the rows (triggers keep rollups and joins), the
    stream's time, the joins' watermark."""
    with conn.transaction():
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO slidewin_streams.{stream} (id, k, ts, v) "
                            "VALUES (%s, %s, %s, 1.5)", [(i, k, at(s)) for i, k, s in rows])
        conn.execute("SELECT slidewin.ingest_advance(%s, %s, %s, NULL)",
                     (stream, at(max(s for _, _, s in rows)), NOW))
        conn.execute("SELECT slidewin.joins_advance(NULL, %s)", (NOW,))


def _works(conn: psycopg.Connection, stream: str) -> None:
    """A batch lands, its windows answer, and a retention step runs."""
    _batch(conn, stream, [(1, 7, 0.0), (2, 7, 0.5), (3, 8, 30.0)])
    found = streams.windows(conn, stream, "tumbling", size=timedelta(seconds=1),
                            start=at(-60), end=at(60))
    assert sum(w.n for w in found) == 3
    assert streams.nibble(conn, stream, NOW) >= 0


# -- the one limit, both sides ------------------------------------------------------------------

def test_python_and_sql_hold_the_same_longest_duration(sconn):
    assert MAX_DURATION == timedelta(days=36_500) and "36500d" in MAX_DURATION_TEXT
    assert sconn.execute("SELECT slidewin.check_duration('x', %s)",
                         (MAX_DURATION,)).fetchone() == (MAX_DURATION,)
    assert check_duration("--x", MAX_DURATION) == MAX_DURATION
    with pytest.raises(psycopg.errors.InvalidParameterValue,
                       match="x .* is longer than the limit of 100 years"):
        sconn.execute("SELECT slidewin.check_duration('x', %s)", (MAX_DURATION + US,))
    with pytest.raises(ConfigError, match="--x .* is longer than the limit of 100 years"):
        check_duration("--x", MAX_DURATION + US)


@pytest.mark.parametrize(("text", "said"), [
    ("3650000d", "--within 3650000d is longer than the limit of 100 years (36500d); use a "
                 "shorter duration"),
    ("9" * 60 + "s", "--within 999999999"),
    ("1" + "0" * 400, LIMIT),  # a float's infinity
])
def test_a_typed_duration_over_the_limit_is_refused_before_it_overflows(text, said):
    with pytest.raises(ConfigError) as err:
        parse_duration(text, name="--within")
    assert said in str(err.value) and "\n" not in str(err.value)
    assert parse_duration("36500d", name="--within") == MAX_DURATION


# -- streams: history and grace ------------------------------------------------------------------

@pytest.mark.parametrize(("history", "expect"), EXTREMES)
def test_stream_history_extremes_are_refused_or_work(sconn, history, expect):
    expect = _outcome(expect, "--history 0s must be more than 0")
    if history == US:  # shorter than grace 0 + the smallest window (1 s): no window could answer
        expect = "is shorter than --grace 0s plus the smallest window (1s)"
    if history == NEG:
        expect = "--history -1s must be more than 0"
    if expect != "ok":
        with pytest.raises(ConfigError, match=re.escape(expect)):
            _declare(sconn, "s", history=history)
        return
    _declare(sconn, "s", history=history)
    _works(sconn, "s")


@pytest.mark.parametrize(("grace", "expect"), EXTREMES)
def test_stream_grace_extremes_are_refused_or_work(sconn, grace, expect):
    kw = {} if grace is None else {"grace": grace}
    if expect not in ("ok", "zero"):
        with pytest.raises(ConfigError, match=f"--grace .*{re.escape(expect)}"):
            _declare(sconn, "s", **kw)
        return
    _declare(sconn, "s", **kw)
    _works(sconn, "s")


@pytest.mark.parametrize(("history", "grace", "said"), [
    ("0 seconds", "0 seconds", "history 0s must be more than 0"),
    ("-1 second", "0 seconds", "history -1s must be more than 0"),
    ("3650000 days", "0 seconds", "history 3650000d is longer than the limit of 100 years"),
    (None, "3650000 days", "grace 3650000d is longer than the limit of 100 years"),
    (None, "-1 second", "grace -1s must be 0 or more"),
    ("2 minutes", "1 hour", "history 2m of stream s is shorter than its grace 1h plus the "
                            "smallest window (1s)"),
])
def test_sql_stream_define_refuses_as_python_does(sconn, history, grace, said):
    """A psql user calling slidewin.stream_define gets the refusal with an errcode."""
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=re.escape(said)):
        sconn.execute("SELECT slidewin.stream_define('s', 'id', 'ts', "
                      "'[{\"name\": \"id\", \"type\": \"bigint\"}]', '{}', false, 4, "
                      "%s::interval, %s::interval)", (history, grace))


def test_stream_alter_refuses_a_history_shorter_than_grace(sconn):
    """`streams alter --history 2m` under a grace of 1h: every window would fail after it."""
    _declare(sconn, "s", history=timedelta(hours=2), grace=timedelta(hours=1))
    with pytest.raises(ConfigError, match=r"--history 2m is shorter than --grace 1h plus the "
                       r"smallest window \(1s\).*keep --history at 3601s or more, or give a "
                       r"shorter --grace"):
        streams.set_retention(sconn, "s", history=timedelta(minutes=2), grace=None)
    with pytest.raises(ConfigError, match="--history 2h is shorter than --grace 2h"):
        streams.set_retention(sconn, "s", history=None, grace=timedelta(hours=2))
    # a psql UPDATE is refused the same way
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="history 2m of stream s"):
        sconn.execute("UPDATE slidewin.streams SET history = '2 minutes' WHERE name = 's'")
    # both at once, in one statement: the pair is checked, not each half against the old other
    done = streams.set_retention(sconn, "s", history=timedelta(minutes=2),
                                 grace=timedelta(seconds=30))
    assert (done.history, done.grace) == (timedelta(minutes=2), timedelta(seconds=30))
    done = streams.set_retention(sconn, "s", history=None, grace=timedelta(seconds=90))
    assert (done.history, done.grace) == (timedelta(minutes=2), timedelta(seconds=90))
    _works(sconn, "s")
    done = streams.set_retention(sconn, "s", history=None, grace=YEARS_100, forever=True)
    assert (done.history, done.grace) == (None, YEARS_100)


def test_cli_stream_options_over_the_limit_name_the_option(sconn, small_store_dsn):
    res = CliRunner().invoke(cli, ["--dsn", small_store_dsn, "streams", "add", "s", "--key",
                                   "id:bigint", "--time", "ts", "--grace", "3650000d"])
    assert res.exit_code == 2 and "--grace 3650000d is longer than the limit" in res.output
    _declare(sconn, "s", history=timedelta(hours=1))
    res = CliRunner().invoke(cli, ["--dsn", small_store_dsn, "streams", "alter", "s", "--grace",
                                   "1h"])
    assert res.exit_code == 2, res.output
    assert "--history 1h is shorter than --grace 1h plus the smallest window" in res.output


# -- joins: within / before / after / grace / idle -----------------------------------------------

def _join(conn: psycopg.Connection, **kw: object) -> joins.Join:
    return joins.define(conn, "j", left="a", right="b", on="k", join_type="full", now=NOW, **kw)


def _join_works(conn: psycopg.Connection) -> None:
    """A batch of each stream lands, the pair is found, W moves, the exact join agrees."""
    _batch(conn, "a", [(1, 7, 0.0), (2, 8, 1.0)])
    _batch(conn, "b", [(1, 7, 0.0), (3, 9, 2.0)])
    pairs = conn.execute("SELECT count(*) FROM slidewin_joins.j "
                         "WHERE l_id IS NOT NULL AND r_id IS NOT NULL").fetchone()
    assert pairs == (1,)


@pytest.fixture
def two(sconn):
    for name in ("a", "b"):
        _declare(sconn, name)
    return sconn


@pytest.mark.parametrize("option", ["before", "after", "grace"])
@pytest.mark.parametrize(("value", "expect"), EXTREMES)
def test_join_duration_extremes_are_refused_or_work(two, option, value, expect):
    kw = {} if value is None else {option: value}
    if expect not in ("ok", "zero"):
        with pytest.raises(ConfigError, match=f"--{option} .*{re.escape(expect)}"):
            _join(two, **kw)
        with pytest.raises(psycopg.errors.InvalidParameterValue, match=option):
            two.execute(f"SELECT slidewin.join_define('j', 'a', 'b', 'k', p_{option} => %s)",
                        (value,))
        return
    _join(two, **kw)
    _join_works(two)


@pytest.mark.parametrize(("value", "expect"), EXTREMES)
def test_as_of_within_extremes_are_refused_or_work(two, value, expect):
    """An as-of join's --within (how old a version may be): bounded as every duration, both
    sides, and at 100 years the lookup (record time - within) still answers."""
    def define() -> joins.Join:
        return joins.define(two, "j", left="a", right="b", on="k", kind="asof",
                            join_type="left", within=value, now=NOW)

    if expect not in ("ok", "zero"):
        with pytest.raises(ConfigError, match=f"--within .*{re.escape(expect)}"):
            define()
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="within"):
            two.execute("SELECT slidewin.join_define('j', 'a', 'b', 'k', p_kind => 'asof', "
                        "p_within => %s)", (value,))
        return
    define()
    _batch(two, "b", [(1, 7, 0.0)])
    _batch(two, "a", [(1, 7, 0.0), (2, 7, 1.0), (3, 8, 1.0)])
    found = {a.l["id"]: a.r and a.r["id"]
             for a in joins.show(two, "j", at(-10), at(10), None) if a.l}
    # within 0 pairs a version of the record's own time only; 1 us, none a second old
    assert found == {1: 1, 2: None if value in (timedelta(0), US) else 1, 3: None}


@pytest.mark.parametrize(("idle", "expect"), [
    pytest.param(timedelta(0), "--idle 0s must be more than 0", id="0"),
    pytest.param(US, "ok", id="1us"),
    pytest.param(YEARS_100, "ok", id="100y"),
    pytest.param(YEARS_10K, f"--idle 3650000d is {LIMIT}", id="10000y"),
    pytest.param(NEG, "--idle -1s must be more than 0", id="negative"),
    pytest.param(None, "ok", id="absent"),
])
def test_join_idle_extremes_are_refused_or_work(two, idle, expect):
    kw = {} if idle is None else {"idle": idle}
    if expect != "ok":
        with pytest.raises(ConfigError, match=re.escape(expect)):
            _join(two, **kw)
        return
    _join(two, **kw)
    _join_works(two)


def test_a_join_at_every_limit_at_once_works_on_streams_holding_data(two):
    """before + after + grace = 300 years, defined over rows already stored (the backfill):
    before, this kind of request failed with "timestamp out of range", naming nothing."""
    _batch(two, "a", [(5, 7, -10.0)])
    _batch(two, "b", [(5, 7, -9.0)])
    _join(two, before=YEARS_100, after=YEARS_100, grace=YEARS_100, idle=YEARS_100)
    _batch(two, "a", [(1, 7, 0.0), (2, 8, 1.0)])
    _batch(two, "b", [(1, 7, 0.0), (3, 9, 2.0)])
    assert two.execute("SELECT count(*) FROM slidewin_joins.j "
                       "WHERE l_id IS NOT NULL AND r_id IS NOT NULL").fetchone() == (4,)


def test_sql_join_define_refuses_a_window_over_the_limit_on_streams_holding_data(two):
    _batch(two, "a", [(5, 7, 0.0)])
    with pytest.raises(psycopg.errors.InvalidParameterValue,
                       match=r"before 3650000d is longer than the limit of 100 years") as err:
        two.execute("SELECT slidewin.join_define('j', 'a', 'b', 'k', p_before => "
                    "'3650000 days', p_after => '3650000 days')")
    assert "--before" in (err.value.diag.message_hint or "")


def test_cli_join_within_over_the_limit_is_one_line_naming_it(two, small_store_dsn):
    res = CliRunner().invoke(cli, ["--dsn", small_store_dsn, "joins", "add", "wxe", "--left",
                                   "a", "--right", "b", "--on", "k", "--within", "3650000d"])
    assert res.exit_code == 2, res.output
    assert ("--within 3650000d is longer than the limit of 100 years (36500d); use a shorter "
            "duration") in res.output
    _batch(two, "a", [(1, 7, 0.0)])  # the stream takes its inserts


# -- session windows: gap, grace, retention ------------------------------------------------------

@pytest.mark.parametrize("option", ["gap", "grace", "retention"])
@pytest.mark.parametrize(("value", "expect"), EXTREMES)
def test_session_duration_extremes_are_refused_or_work(sconn, option, value, expect):
    base = {"gap": timedelta(seconds=30), "grace": timedelta(0),
            "retention": timedelta(hours=1)}
    if value is not None:
        base[option] = value
        if option in ("gap", "grace") and value > base["retention"]:
            base["retention"] = value  # KIP-428: retention >= gap + grace
    if option == "gap" and value in (US, YEARS_100):
        base["retention"] = max(value, timedelta(hours=1))
    if option == "retention" and value is not None and timedelta(0) <= value < timedelta(
            seconds=30):
        expect = "is shorter than --gap plus --grace"
    if option == "gap" and value is not None and value <= timedelta(0):
        expect = "must be more than 0"
    if option == "grace" and value == YEARS_100:  # no retention can cover gap 30s + grace
        expect = "--gap plus --grace (3153600030s) is longer than the limit of 100 years"
    if expect not in ("ok", "zero"):
        with pytest.raises(ConfigError, match=re.escape(expect)):
            sessions.SessionDef("visits", base["gap"], base["grace"], base["retention"])
        with pytest.raises(psycopg.errors.InvalidParameterValue):  # and from psql
            sconn.execute("SELECT slidewin.session_define('visits', %s, %s, %s)",
                          (base["gap"], base["grace"], base["retention"]))
        return
    sessions.define(sconn, sessions.SessionDef("visits", base["gap"], base["grace"],
                                               base["retention"]))
    insert_events(sconn, [Event("k1", 1, at(0)), Event("k1", 2, at(1)), Event("k2", 3, at(5))],
                  PARTS)
    found = sessions.sessions(sconn, None, "visits")
    assert sum(s.n for s in found) == 3
    assert sessions.expire(sconn) >= 0


# -- retention policies ------------------------------------------------------------------------

@pytest.mark.parametrize(("history", "expect"), EXTREMES)
def test_retention_history_extremes_are_refused_or_work(sconn, history, expect):
    if expect in ("ok", "zero"):
        if history is not None and history > timedelta(0):
            upsert_settings(sconn, RetentionSettings("p", history.total_seconds(), None, 100, 0))
        RetentionPolicy(history=history, max_rows=None if history else 10)
        return
    if expect == LIMIT:
        with pytest.raises(ConfigError, match="--history 3650000d is longer than the limit"):
            RetentionPolicy(history=history)
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="history 3650000d is"):
            upsert_settings(sconn, RetentionSettings("p", history.total_seconds(), None, 100, 0))
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="history .* is longer"):
            upsert_settings(sconn, RetentionSettings("p", 1e300, None, 100, 0))  # past interval
    else:
        with pytest.raises(ConfigError, match="negative"):
            RetentionPolicy(history=history)


def test_library_refusals_are_config_errors_not_database_errors(sconn):
    """Python validates first, with the same limit: no SQL runs for a bad definition."""
    with pytest.raises(ConfigError):
        _declare(sconn, "s", grace=YEARS_10K)
    assert sconn.execute("SELECT count(*) FROM slidewin.streams WHERE name = 's'").fetchone() \
        == (0,)
    with pytest.raises(ProcedureError, match="no stream"):
        _join(sconn)  # valid durations pass the Python check and reach the SQL


# -- count windows: the most events ------------------------------------------------------------

def test_count_window_numbers_past_the_limit_are_refused_before_the_sql(sconn, small_store_dsn):
    """SQL and Python hold the same most events; a larger number named, not a missing
    function (a Python int past 2**31 is a bigint no count-window function takes)."""
    sconn.execute("SELECT slidewin.check_count_windows(1, 1, %s)", (MAX_WINDOW_EVENTS,))
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="to 1000000 events"):
        sconn.execute("SELECT slidewin.check_count_windows(1, 1, %s)", (MAX_WINDOW_EVENTS + 1,))
    with pytest.raises(ConfigError, match=r"--rows 100000000000 is more than the limit of "
                       r"1000000 events"):
        windows.count_windows(sconn, 1, None, 100_000_000_000)
    res = CliRunner().invoke(cli, ["--dsn", small_store_dsn, "windows", "rows", "--size", "1",
                                   "--rows", "100000000000"])
    assert res.exit_code == 2 and "--rows 100000000000 is more than the limit" in res.output
