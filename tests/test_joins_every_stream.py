"""Joins of every stream: the built-in ``events`` on either side or both, and a stream joined
with itself, through the same join code as two declared streams -- each compared with
``slidewin.join_exact`` once W has passed every record, at the window's bounds, in a batch that
is both sides of a self-join, and under retention.

A "batch" is what the ingest does in its transaction: insert the rows (events partition by
partition, as its binary COPY does; a declared stream through its table), raise the stream's
time (slidewin.ingest_advance), move the joins' watermark (slidewin.joins_advance).

The streams: ``events`` (uuid, val, ts), joined on uuid; ``tags`` (key, ts, tag), joined on key;
``readings`` (id, station, ts), joined with itself on station. A record here is (id, on, time):
for events and tags the id is the key and the on-column both.
"""

from __future__ import annotations

import random
import threading
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta

import psycopg
import pytest
from click.testing import CliRunner

from slidewin.client.cli import cli
from slidewin.db import joins, streams
from slidewin.db.errors import ProcedureError
from slidewin.db.streams import Column
from tests.conftest import T0

S = timedelta(seconds=1)
US = timedelta(microseconds=1)
Rec = tuple[str, str, datetime]  # (id, on value, time)
Identity = tuple[datetime | None, str | None, datetime | None, str | None]
ON = {"events": "uuid", "tags": "key", "readings": "station"}


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def declare(conn: psycopg.Connection, history: timedelta | None = None) -> None:
    streams.define(conn, "tags", key="key", time="ts", history=history,
                   columns=[Column("key", "text"), Column("tag", "text")])
    streams.define(conn, "readings", key="id", time="ts", history=history,
                   columns=[Column("id", "text"), Column("station", "text")])


def define(conn: psycopg.Connection, left: str, right: str, **kw: object) -> None:
    joins.define(conn, "j", left=left, right=right, on=f"{ON[left]}={ON[right]}",
                 **kw)  # type: ignore[arg-type]


def insert(conn: psycopg.Connection, stream: str, rows: Iterable[Rec]) -> None:
    rows = list(rows)
    with conn.cursor() as cur:
        if stream == "events":  # one statement per partition, as the ingest's COPY
            by_part: dict[int, list[Rec]] = defaultdict(list)
            for r in rows:
                part = conn.execute("SELECT slidewin.partition_of(%s)", (r[0],)).fetchone()
                assert part is not None
                by_part[part[0]].append(r)
            for part, chunk in sorted(by_part.items()):
                cur.execute(
                    f"INSERT INTO slidewin.events_p{part:03d} (part, uuid, val, ts) "
                    "SELECT %s, u, 1, t FROM unnest(%s::text[], %s::timestamptz[]) AS x(u, t) "
                    "ON CONFLICT DO NOTHING",
                    (part, [r[0] for r in chunk], [r[2] for r in chunk]))
        elif stream == "tags":
            cur.execute("INSERT INTO slidewin_streams.tags (key, ts, tag) SELECT u, t, 'x' "
                        "FROM unnest(%s::text[], %s::timestamptz[]) AS x(u, t) "
                        "ON CONFLICT DO NOTHING", ([r[0] for r in rows], [r[2] for r in rows]))
        else:
            cur.execute("INSERT INTO slidewin_streams.readings (id, station, ts) "
                        "SELECT * FROM unnest(%s::text[], %s::text[], %s::timestamptz[]) "
                        "ON CONFLICT DO NOTHING",
                        ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]))


def batch(conn: psycopg.Connection, stream: str, rows: Iterable[Rec], now: datetime) -> None:
    rows = list(rows)
    with conn.transaction():
        insert(conn, stream, rows)
        if rows:
            conn.execute("SELECT slidewin.ingest_advance(%s, %s, %s, '0s')",
                         (stream, max(r[2] for r in rows), now))
        conn.execute("SELECT slidewin.joins_advance(%s, %s)", (stream, now))


def results(conn: psycopg.Connection) -> list[Identity]:
    got = joins.results(conn, "j")
    assert len(got) == len(set(got)), "a result written twice"
    return sorted(got, key=repr)


def exact(conn: psycopg.Connection, start: float = -1000, end: float = 1000) -> list[Identity]:
    return sorted(joins.exact(conn, "j", at(start), at(end)), key=repr)


def pairs(conn: psycopg.Connection) -> set[tuple[str | None, str | None]]:
    """The results as (left id, right id); for events and tags the id is the key."""
    return {(r[1], r[3]) for r in joins.results(conn, "j")}


def records(rng: random.Random, stream: str, n: int) -> list[Rec]:
    """n records of a few keys over a minute; ids unique per (id, time) identity."""
    out = []
    for i in range(n):
        on = rng.choice("abcd")
        ident = on if stream in ("events", "tags") else f"{stream[0]}{i}"
        out.append((ident, on, at(rng.randrange(0, 60_000) / 1000)))
    return out


CASES = [("events", "tags"), ("tags", "events"), ("events", "events"),
         ("readings", "readings")]


@pytest.mark.parametrize("join_type", ["inner", "left", "right", "full"])
@pytest.mark.parametrize(("left", "right"), CASES, ids=["-".join(c) for c in CASES])
def test_events_and_self_joins_equal_the_one_query_exact_join(
    conn: psycopg.Connection, left: str, right: str, join_type: str,
) -> None:
    """Random records in random batches, out of order within and beyond the grace (late
    records), re-sent records: no result is withdrawn, and once W is past every record the
    results are the one SQL join of the stored records (a self-join: the table with itself)."""
    rng = random.Random(f"{left}{right}{join_type}")
    declare(conn)
    define(conn, left, right, join_type=join_type, before=rng.choice([0, 2]) * S,
           after=rng.choice([1, 3]) * S, grace=2 * S, idle=None)
    pending = {s: records(rng, s, 60) for s in {left, right}}
    for rows in pending.values():
        rows.sort(key=lambda r: r[2] + timedelta(seconds=rng.uniform(-4, 4)))  # disorder
    seen: set[Identity] = set()
    while any(pending.values()):
        stream = rng.choice([s for s, rows in pending.items() if rows])
        n = rng.randint(1, 10)
        chunk, pending[stream] = pending[stream][:n], pending[stream][n:]
        if rng.random() < 0.2:
            chunk.append(chunk[0])  # re-sent in the same batch
        batch(conn, stream, chunk, at(0))
        now = set(results(conn))
        assert seen <= now  # nothing withdrawn
        seen = now
    for stream in {left, right}:
        batch(conn, stream, [("zz", "zz", at(200))], at(0))
    got = results(conn)
    assert got == exact(conn)
    st = joins.status(conn, "j")
    assert st.watermark == at(198)
    assert st.pairs + st.left_only + st.right_only == len(got)
    assert st.late_left + st.late_right > 0  # the disorder made some late: they are left out
    if left == right:  # a late record is late on both sides of a self-join
        assert st.late_left == st.late_right
    shown = joins.show(conn, "j", at(-1000), at(1000), None)
    assert len(shown) == len(got)


def test_a_self_join_pairs_each_record_with_itself_and_the_bounds_are_inclusive(
    conn: psycopg.Connection,
) -> None:
    # readings of station s, the window before 2 s, after 3 s around o at 10 s:
    #   r1 (8 s - 1 us) | r2 (8 s) | o (10 s) | r3 (13 s) | r4 (13 s + 1 us)
    #                   [===========================]
    declare(conn)
    joins.define(conn, "j", left="readings", right="readings", on="station", before=2 * S,
                 after=3 * S)
    batch(conn, "readings", [("r1", "s", at(8) - US), ("r2", "s", at(8)), ("o", "s", at(10)),
                             ("r3", "s", at(13)), ("r4", "s", at(13) + US),
                             ("x", "other", at(10))], at(0))
    got = {(lid, rid) for _, lid, _, rid in _ids(conn)}
    assert {rid for lid, rid in got if lid == "o"} == {"r2", "o", "r3"}
    # o is the right record of every left one it lies within -2 s / +3 s of
    assert {lid for lid, rid in got if rid == "o"} == {"r1", "r2", "o"}
    assert ("x", "x") in got  # alone at its station, it still pairs with itself
    assert sorted(joins.results(conn, "j"), key=repr) == exact(conn)


def test_events_pair_at_exactly_before_and_after_and_not_one_microsecond_past(
    conn: psycopg.Connection,
) -> None:
    declare(conn)
    joins.define(conn, "j", left="events", right="tags", on="uuid=key", before=2 * S,
                 after=3 * S)
    batch(conn, "events", [("a", "a", at(10))], at(0))
    batch(conn, "tags", [("a", "a", at(8) - US), ("a", "a", at(8)), ("a", "a", at(13)),
                         ("a", "a", at(13) + US)], at(0))
    got = sorted(r[2] for r in joins.results(conn, "j"))
    assert got == [at(8), at(13)]
    assert sorted(joins.results(conn, "j"), key=repr) == exact(conn)


def test_a_batch_holding_both_sides_of_a_self_join_pairs_each_ordered_pair_once(
    conn: psycopg.Connection,
) -> None:
    declare(conn)
    joins.define(conn, "j", left="readings", right="readings", on="station", before=5 * S,
                 after=5 * S, grace=60 * S)
    batch(conn, "readings", [("p", "s", at(10)), ("q", "s", at(11)), ("far", "s", at(30))],
          at(0))
    assert sorted((lid, rid) for _, lid, _, rid in _ids(conn)) == [
        ("far", "far"), ("p", "p"), ("p", "q"), ("q", "p"), ("q", "q")]
    batch(conn, "readings", [("t", "s", at(12))], at(0))  # new x stored, stored x new
    assert sorted((lid, rid) for _, lid, _, rid in _ids(conn)) == [
        ("far", "far"), ("p", "p"), ("p", "q"), ("p", "t"), ("q", "p"), ("q", "q"), ("q", "t"),
        ("t", "p"), ("t", "q"), ("t", "t")]
    assert joins.status(conn, "j").pairs == 10
    assert sorted(joins.results(conn, "j"), key=repr) == exact(conn)


def test_events_self_join_in_one_statement_through_the_parent_and_its_backfill(
    conn: psycopg.Connection,
) -> None:
    """Rows the stream holds when the join is defined are paired by the definition; a statement
    naming slidewin.events itself (not a partition) is joined once."""
    for u, s in (("a", 1), ("a", 2), ("b", 2)):
        conn.execute("SELECT slidewin.insert_event(%s, 1, %s)", (u, at(s)))
    joins.define(conn, "j", left="events", right="events", on="uuid", before=S, after=S)
    assert pairs(conn) == {("a", "a"), ("b", "b")}
    assert joins.status(conn, "j").pairs == 5
    conn.execute("INSERT INTO slidewin.events (part, uuid, val, ts) SELECT "
                 "slidewin.partition_of(u), u, 1, t FROM (VALUES ('a', %s::timestamptz), "
                 "('b', %s::timestamptz)) v(u, t)", (at(3), at(2.5)))
    assert joins.status(conn, "j").pairs == 5 + 3 + 3
    assert sorted(joins.results(conn, "j"), key=repr) == exact(conn)


def test_retention_of_a_joined_events_keeps_what_w_has_not_passed(
    conn: psycopg.Connection,
) -> None:
    """Events ahead of the tags: W (the tags' time) holds events retention back, whatever the
    cutoff or the row target; once W passes, the records go and the results stand. Records of a
    gap apart (no pair across 5 s or 50 s): after the nibbles the results over what is still
    stored are the exact join of it, and those before what the exact join gave before they went."""
    declare(conn, history=timedelta(minutes=1))
    joins.define(conn, "j", left="events", right="tags", on="uuid=key", join_type="left",
                 before=5 * S, after=5 * S, idle=None)
    batch(conn, "events", [("a", "a", at(1)), ("u", "u", at(12)), ("c", "c", at(40))], at(0))
    batch(conn, "tags", [("a", "a", at(3)), ("w", "w", at(10))], at(0))  # W = 10 s
    first = exact(conn, -1000, 5)  # a's pair, final: W = 10 s is past both records
    assert _nibble_events(conn, at(1000), 0) == 1  # a (1 s) only: W - after = 5 s
    assert _stored_events(conn) == ["u", "c"]  # u unpaired, W has not passed it
    assert ("u", None) not in pairs(conn)  # nor is its outer row final yet
    with pytest.raises(psycopg.errors.ObjectInUse, match="stream events is joined by j"):
        conn.execute("DELETE FROM slidewin.events WHERE uuid = 'u'")
    with pytest.raises(psycopg.errors.ObjectInUse, match="stream events is joined by j"):
        conn.execute(f"TRUNCATE slidewin.events_p{_part(conn, 'u'):03d}")  # a partition too
    batch(conn, "tags", [("c", "c", at(42)), ("end", "end", at(45))], at(0))  # W = 40 s
    before_gap = exact(conn, 5, 50)
    assert ("u", None) in pairs(conn)
    assert _nibble_events(conn, at(1000), None) == 1  # u goes: W - after = 35 s
    batch(conn, "events", [("n", "n", at(100)), ("m", "m", at(101))], at(0))
    batch(conn, "tags", [("n", "n", at(103)), ("end", "end", at(200))], at(0))  # W = 101 s
    assert _nibble_events(conn, at(1000), None) == 1  # c (40 s) goes, n and m stay
    assert _stored_events(conn) == ["n", "m"]
    batch(conn, "events", [("end", "end", at(200))], at(0))  # W = 200 s: m's outer row
    got = results(conn)
    assert [r for r in got if (r[0] or r[2]) >= at(50)] == exact(conn, 50, 1000)
    assert [r for r in got if (r[0] or r[2]) < at(50)] == sorted(first + before_gap, key=repr)
    # a result goes once both records may be gone: before events' oldest second (100 s)
    assert joins.nibble(conn, "j", at(1000)) == 3  # a's, u's and c's results
    assert min(r[0] or r[2] for r in results(conn)) == at(100)


def test_a_joined_declared_stream_self_join_keeps_records_for_both_sides(
    conn: psycopg.Connection,
) -> None:
    # before 4 s, after 1 s: as a right record, mid (7 s) still pairs with a left one up to 11 s,
    # so retention keeps what W - 4 s has not passed (the left side's W - 1 s alone would not)
    declare(conn, history=timedelta(minutes=1))
    joins.define(conn, "j", left="readings", right="readings", on="station", before=4 * S,
                 after=1 * S, grace=0 * S)
    batch(conn, "readings", [("old", "s", at(0)), ("mid", "s", at(7)), ("new", "t", at(10))],
          at(0))  # W = 10 s
    assert streams.nibble(conn, "readings", at(1000)) == 1  # old: 0 s < W - 4 s = 6 s
    assert [r[0] for r in conn.execute(
        "SELECT id FROM slidewin_streams.readings ORDER BY ts")] == ["mid", "new"]
    batch(conn, "readings", [("next", "s", at(10.5))], at(0))
    assert ("next", "mid") in {(lid, rid) for _, lid, _, rid in _ids(conn)}
    got = [r for r in joins.results(conn, "j") if r[0] >= at(5) and r[2] >= at(5)]
    assert sorted(got, key=repr) == exact(conn, 5, 100)


def test_the_events_ingest_pairs_its_copy_and_moves_the_joins_watermark(
    conn: psycopg.Connection,
) -> None:
    """The built-in ingest's sink (binary COPY straight into the partitions, no Spark needed
    here): its rows are paired as they are written, and its batch moves W, so a left record
    with no pair gets its outer row from the events' batch alone."""
    import pyarrow as pa

    from slidewin.ingest.batch import GOOD_SCHEMA
    from slidewin.ingest.sink import BatchRows, write_batch
    from tests.serve_fixtures import BAD_SCHEMA

    declare(conn)
    joins.define(conn, "j", left="tags", right="events", on="key=uuid", before=5 * S,
                 after=5 * S, join_type="left", idle=None)
    batch(conn, "tags", [("a", "a", at(10)), ("b", "b", at(20)), ("end", "end", at(100))],
          at(0))

    def good(rows: list[tuple[str, float]]) -> pa.Table:
        return pa.Table.from_pylist(
            [{"part": _part(conn, u), "uuid": u, "val": 1, "copies": 1, "ts": at(s)}
             for u, s in rows], schema=GOOD_SCHEMA)

    empty = pa.Table.from_pylist([], schema=BAD_SCHEMA)
    write_batch(conn, "q", "events", 0, lambda _state: BatchRows(good([("a", 12), ("x", 13)]),
                                                                  empty))
    assert pairs(conn) == {("a", "a")}
    assert joins.status(conn, "j").watermark == at(13)  # the events batch moved W
    write_batch(conn, "q", "events", 1, lambda _state: BatchRows(good([("z", 60)]), empty))
    assert pairs(conn) == {("a", "a"), ("b", None)}  # W = 60 s > 20 s + 5 s: final
    assert sorted(joins.results(conn, "j"), key=repr) == exact(conn, -1000, 50)


def test_a_join_defined_while_an_events_batch_runs_pairs_that_batch(
    conn: psycopg.Connection, store_dsn: str,
) -> None:
    """The built-in ingest's batch takes no registry row but its stream's state row, first: the
    definition waits on that row, before it locks any partition for its triggers, so the batch
    goes on writing partitions on both sides of the one it wrote first (no deadlock) and its
    rows, written before the join's triggers existed, are paired once it commits."""
    declare(conn)
    batch(conn, "tags", [("a", "a", at(10))], at(0))
    done = threading.Event()
    with psycopg.connect(store_dsn, autocommit=True) as writer:
        with writer.transaction():
            writer.execute("SELECT * FROM slidewin.stream_begin('events')")
            insert(writer, "events", [("a", "a", at(11))])

            def define_join() -> None:
                with psycopg.connect(store_dsn, autocommit=True) as other:
                    joins.define(other, "j", left="events", right="tags", on="uuid=key",
                                 before=5 * S, after=5 * S)
                done.set()

            definer = threading.Thread(target=define_join)
            definer.start()
            _until_a_backend_waits_for_a_lock(conn)
            assert not done.is_set()  # it waits for the batch
            insert(writer, "events", [(k, k, at(12)) for k in "bcdefghij"])
        definer.join(30)
    assert done.is_set()
    assert len({_part(conn, k) for k in "abcdefghij"}) > 4  # partitions on both sides of a's
    assert pairs(conn) == {("a", "a")}


def _until_a_backend_waits_for_a_lock(conn: psycopg.Connection) -> None:
    for _ in range(300):
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                           "current_database() AND wait_event_type = 'Lock'").fetchone()
        if row and row[0] > 0:
            return
        threading.Event().wait(0.05)
    raise AssertionError("the definition never waited for the batch")


def _part(conn: psycopg.Connection, key: str) -> int:
    row = conn.execute("SELECT slidewin.partition_of(%s)", (key,)).fetchone()
    assert row is not None
    return int(row[0])


def test_cli_joins_add_accepts_events_and_a_self_join(conn: psycopg.Connection, store_dsn: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLIDEWIN_DSN", store_dsn)
    declare(conn)
    out = CliRunner().invoke(cli, ["joins", "add", "tagged", "--left", "events", "--right",
                                   "tags", "--on", "uuid=key", "--within", "1m", "--type",
                                   "full", "--select", "val,tags.tag"])
    assert out.exit_code == 0, out.output
    out = CliRunner().invoke(cli, ["joins", "add", "near", "--left", "readings", "--right",
                                   "readings", "--on", "station", "--within", "5s",
                                   "--select", "readings.station"])
    assert out.exit_code == 0, out.output
    near = joins.get_join(conn, "near")
    assert near.select_left == near.select_right == ("ts", "id", "station")
    tagged = joins.get_join(conn, "tagged")
    assert tagged.select_left == ("ts", "uuid", "val")
    for kind in (["--rows", "2"], ["--as-of"]):
        out = CliRunner().invoke(cli, ["joins", "add", f"k{len(kind)}", "--left", "tags",
                                       "--right", "events", "--on", "key=uuid", *kind])
        assert out.exit_code == 0, out.output
    batch(conn, "events", [("a", "a", at(1))], at(0))
    batch(conn, "tags", [("a", "a", at(2))], at(0))
    show = CliRunner().invoke(cli, ["joins", "show", "tagged", "--from", at(0).isoformat(),
                                    "--to", at(10).isoformat(), "--json"])
    assert show.exit_code == 0, show.output
    assert '"uuid": "a"' in show.stdout and '"tag": "x"' in show.stdout
    listed = CliRunner().invoke(cli, ["joins", "list"])
    assert listed.exit_code == 0 and "near" in listed.stdout, listed.output
    for name in ("k2", "k1"):  # rows and as-of joins with events on the right
        got = joins.show(conn, name, at(0), at(10), None)
        assert [(a.l["key"], a.r["uuid"] if a.r else None) for a in got] == [("a", "a")]


def test_the_self_join_check_is_gone_from_a_store_made_with_it(conn: psycopg.Connection) -> None:
    """A store made when the registry refused a self-join (its CHECK) loses the CHECK on
    slidewin db init, and init stays idempotent."""
    from slidewin.db.schema import init_schema

    conn.execute("ALTER TABLE slidewin.joins ADD CONSTRAINT joins_check "
                  "CHECK (left_stream <> right_stream)")
    init_schema(conn)
    init_schema(conn)
    declare(conn)
    joins.define(conn, "j", left="readings", right="readings", on="station", before=S, after=S)
    assert joins.get_join(conn, "j").left == "readings"


def test_a_dropped_events_join_takes_its_triggers_from_every_partition(
    conn: psycopg.Connection,
) -> None:
    declare(conn)
    joins.define(conn, "j", left="events", right="events", on="uuid", before=S, after=S)
    on = conn.execute("SELECT count(*) FROM pg_trigger WHERE tgname = 'joins_on_insert' "
                      "AND tgrelid IN (SELECT 'slidewin.events'::regclass UNION ALL SELECT "
                      "inhrelid FROM pg_inherits WHERE inhparent = 'slidewin.events'::regclass)"
                      ).fetchone()
    assert on is not None and on[0] == 9  # the parent and its 8 partitions
    joins.drop(conn, "j")
    left = conn.execute("SELECT count(*) FROM pg_trigger WHERE tgname IN "
                        "('joins_on_insert', 'joins_refuse_change')").fetchone()
    assert left == (0,)
    conn.execute("DELETE FROM slidewin.events")  # no join: changes by hand go through


def test_db_reset_names_the_join_that_reads_events(conn: psycopg.Connection) -> None:
    from slidewin.db.reset import reset_store

    declare(conn)
    joins.define(conn, "tagged", left="events", right="tags", on="uuid=key", before=S, after=S)
    with pytest.raises(ProcedureError, match="db reset: stream events is joined by tagged"):
        reset_store(conn)
    joins.drop(conn, "tagged")
    assert "events" in reset_store(conn)


def _ids(conn: psycopg.Connection) -> list[Identity]:
    rows = conn.execute("SELECT l_ts, l_id, r_ts, r_id FROM slidewin_joins.j").fetchall()
    return [tuple(r) for r in rows]


def _stored_events(conn: psycopg.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT uuid FROM slidewin.events ORDER BY ts")]


def _nibble_events(conn: psycopg.Connection, cutoff: datetime, target: int | None) -> int:
    """Every partition nibbled to the cutoff (and the row target, when given), as the retention
    job does: the rows it deleted."""
    total = 0
    for (part,) in conn.execute("SELECT slidewin.partition_keys()").fetchall():
        row = conn.execute("SELECT slidewin.nibble(%s, %s, %s, 1000)",
                           (part, cutoff, target)).fetchone()
        assert row is not None
        total += row[0]
    return total


def test_nibbling_an_unjoined_events_is_unchanged(conn: psycopg.Connection) -> None:
    for s in range(5):
        conn.execute("SELECT slidewin.insert_event('k', 1, %s)", (at(s),))
    assert _nibble_events(conn, at(3), None) == 3  # no join: the cutoff alone
