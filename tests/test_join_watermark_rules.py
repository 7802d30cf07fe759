"""What a join's watermark W waits for, and what a joined stream refuses.

- An input that has never had data holds W back -- with ``--idle never`` and with an idle,
  however long after the definition its first batch comes, and on the scheduler's tick -- so W
  never passes records the join has not seen and nothing marked final turns out wrong.
- A DELETE, UPDATE or TRUNCATE by hand of a joined stream's records is refused with one line
  naming the join and the fix; retention's deletes are not, and the join stays exact.

A "batch" is what the ingest does in its transaction (tests/test_joins.py's ``batch``).
"""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest
from click.testing import CliRunner

from slidewin.client.cli import cli
from slidewin.db import joins, streams
from slidewin.db.schema import init_schema
from slidewin.db.streams import Column
from tests.test_joins import MS, S, at, batch, declare, pairs_of

HOUR = timedelta(hours=1)


def exact_equals_results(conn: psycopg.Connection, name: str) -> None:
    got = sorted(joins.results(conn, name), key=repr)
    assert got == sorted(joins.exact(conn, name, at(-10_000), at(100_000)), key=repr)


# -- --idle never (issue 34, section 3) ---------------------------------------------------------

def test_idle_never_waits_for_an_input_with_no_data_yet(conn: psycopg.Connection) -> None:
    """The issue's reproduction: pl and pr, --within 10ms --idle never. Two pl records at
    00:00:00 and 00:00:01 leave W unset while pr is empty, so a pr record at 00:00:00.995 pairs
    with the one at 00:00:01 instead of landing in "never_j#late"."""
    for name in ("pl", "pr"):
        streams.define(conn, name, key="id", time="ts",
                       columns=[Column("id", "text"), Column("k", "text")])
    joins.define(conn, "never_j", left="pl", right="pr", on="k", before=10 * MS, after=10 * MS,
                 idle=None, now=at(0))
    batch(conn, "pl", [("l0", "a", at(0)), ("l1", "a", at(1))], at(0))
    assert joins.status(conn, "never_j").watermark is None
    joins.advance(conn, at(0) + 1000 * HOUR)  # the tick: pr still has no data, W stays unset
    assert joins.status(conn, "never_j").watermark is None
    batch(conn, "pr", [("r", "a", at(0.995))], at(0) + 1000 * HOUR)
    st = joins.status(conn, "never_j")
    assert (st.pairs, st.late_left, st.late_right) == (1, 0, 0)
    assert pairs_of(conn, "never_j") == {("l1", "r")}
    assert conn.execute('SELECT count(*) FROM slidewin_joins."never_j#late"').fetchone() == (0,)
    assert st.watermark == at(0.995)


def test_idle_never_keeps_a_silent_input_holding_w_back(conn: psycopg.Connection) -> None:
    declare(conn)
    joins.define(conn, "j", left="orders", right="shipments", on="k", join_type="left",
                 after=S, idle=None, now=at(0))
    batch(conn, "shipments", [("s", "b", at(5))], at(0))
    batch(conn, "orders", [("o", "a", at(10)), ("o2", "a", at(20))], at(0))
    joins.advance(conn, at(0) + 1000 * HOUR)  # shipments silent for ages: still counts
    assert joins.status(conn, "j").watermark == at(5)
    assert pairs_of(conn, "j") == set()


# -- an input with no data yet (issue 34, section 5 item 1) ------------------------------------

@pytest.mark.parametrize("idle", [timedelta(minutes=1), None], ids=["idle-1m", "idle-never"])
def test_a_join_defined_long_before_its_data_waits_for_both_streams_first_batch(
    conn: psycopg.Connection, idle: timedelta | None,
) -> None:
    """The join is defined, then, an hour later (far past idle), the left stream's whole
    history commits in one batch and the scheduler ticks; then the right stream's history
    commits. W waits for the right stream's first batch, so every pair is found, no record is
    late, and no outer row written before it (all of which were marked final) turns out wrong:
    the results are the one SQL join."""
    declare(conn)
    joins.define(conn, "j", left="orders", right="shipments", on="k", join_type="left",
                 before=2 * S, after=2 * S, grace=S, idle=idle, now=at(0))
    left = [(f"o{i}", f"k{i % 40}", at(i)) for i in range(300)]
    right = [(f"s{i}", f"k{i % 40}", at(i + 1)) for i in range(0, 300, 3)]
    batch(conn, "orders", left, at(0) + HOUR)
    st = joins.status(conn, "j")
    assert (st.watermark, st.complete_up_to, st.waiting_for) == (None, None, ("right",))
    joins.advance(conn, at(0) + 2 * HOUR)  # the scheduler's tick does not pass it either
    from slidewin.jobs.retention import tick_joins
    tick_joins(conn, at(0) + 3 * HOUR, chunk=100)
    st = joins.status(conn, "j")
    assert (st.watermark, st.left_only, st.right_only) == (None, 0, 0)
    batch(conn, "shipments", right, at(0) + 4 * HOUR)
    st = joins.status(conn, "j")
    assert (st.late_left, st.late_right, st.waiting_for) == (0, 0, ())
    assert st.watermark == at(297)  # min(299, 298) - grace
    exact_pairs = [r for r in joins.exact(conn, "j", at(-10), at(400)) if r[2] is not None]
    assert st.pairs == len(exact_pairs) == 100  # each shipment pairs with its order only
    # both streams move on: every record passed, the results are the exact join
    batch(conn, "orders", [("end", "end", at(1000))], at(0) + 4 * HOUR)
    batch(conn, "shipments", [("end", "end", at(1000))], at(0) + 4 * HOUR)
    exact_equals_results(conn, "j")
    assert joins.status(conn, "j").pairs > 0


def test_an_input_silent_after_it_had_data_still_stops_holding_w_back(
    conn: psycopg.Connection,
) -> None:
    """Idleness is for an input that once had data: that one is let go after idle."""
    declare(conn)
    joins.define(conn, "j", left="orders", right="shipments", on="k", join_type="left",
                 after=S, idle=timedelta(minutes=1), now=at(0))
    batch(conn, "orders", [("o", "a", at(10)), ("o2", "a", at(20))], at(0))
    joins.advance(conn, at(600))
    assert joins.status(conn, "j").watermark is None  # shipments never had data
    batch(conn, "shipments", [("s", "b", at(5))], at(600))
    assert joins.status(conn, "j").watermark == at(5)
    joins.advance(conn, at(661))  # shipments silent for over a minute (wall clock)
    assert joins.status(conn, "j").watermark == at(20)
    assert pairs_of(conn, "j") == {("o", None)}


def test_show_and_list_say_which_stream_the_join_waits_for(
    conn: psycopg.Connection, store_dsn: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLIDEWIN_DSN", store_dsn)
    declare(conn)
    joins.define(conn, "j", left="orders", right="shipments", on="k", join_type="left",
                 now=at(0))
    batch(conn, "orders", [("o", "a", at(10))], at(0) + HOUR)
    shown = CliRunner().invoke(cli, ["joins", "show", "j"])
    assert shown.exit_code == 0, shown.output
    assert "waiting for first data on right (shipments)" in shown.output
    listed = CliRunner().invoke(cli, ["joins", "list"])
    assert "waiting for right" in listed.output
    as_json = CliRunner().invoke(cli, ["joins", "show", "j", "--json"])
    assert '"waiting_for": ["right"]' in as_json.stdout
    batch(conn, "shipments", [("s", "b", at(10))], at(0) + HOUR)
    shown = CliRunner().invoke(cli, ["joins", "show", "j"])
    assert "waiting for" not in shown.output


# -- changes by hand under a join (issue 34, section 4) ----------------------------------------

CHANGES = {
    "delete": "DELETE FROM slidewin_streams.shipments WHERE id = 's'",
    "update": "UPDATE slidewin_streams.shipments SET k = 'zz' WHERE id = 's'",
    "update-time": "UPDATE slidewin_streams.shipments SET ts = ts + interval '1 hour' "
                   "WHERE id = 's'",
    "truncate": "TRUNCATE slidewin_streams.shipments",
    "delete-left": "DELETE FROM slidewin_streams.orders WHERE id = 'o'",
}


def paired_and_passed(conn: psycopg.Connection) -> None:
    """o and s paired, W past both; o2 alone, its outer row written."""
    declare(conn)
    joins.define(conn, "j", left="orders", right="shipments", on="k", join_type="left",
                 before=5 * S, after=5 * S, now=at(0))
    batch(conn, "orders", [("o", "a", at(10)), ("o2", "b", at(11))], at(0))
    batch(conn, "shipments", [("s", "a", at(12))], at(0))
    batch(conn, "orders", [("end", "end", at(100))], at(0))
    batch(conn, "shipments", [("end", "end", at(100))], at(0))
    assert pairs_of(conn, "j") == {("o", "s"), ("o2", None), ("end", "end")}


@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_a_change_by_hand_to_a_joined_streams_records_is_refused_in_one_line(
    conn: psycopg.Connection, change: str,
) -> None:
    paired_and_passed(conn)
    stream = "orders" if change == "delete-left" else "shipments"
    with pytest.raises(psycopg.errors.ObjectInUse) as refused:
        conn.execute(CHANGES[change])
    message = refused.value.diag.message_primary or ""
    assert message.startswith(f"stream {stream} is joined by j: ")
    assert change.split("-")[0].upper() in message
    assert "slidewin joins drop j --yes" in message and "\n" not in message
    assert pairs_of(conn, "j") == {("o", "s"), ("o2", None), ("end", "end")}
    exact_equals_results(conn, "j")  # the stored records and the results still agree


def test_a_stream_no_longer_joined_takes_changes_by_hand_again(conn: psycopg.Connection) -> None:
    paired_and_passed(conn)
    joins.drop(conn, "j")
    conn.execute(CHANGES["delete"])
    conn.execute(CHANGES["update"].replace("'s'", "'end'"))
    conn.execute(CHANGES["truncate"])
    # the fix the refusal names: change the records, then define the join again
    joins.define(conn, "j", left="orders", right="shipments", on="k", join_type="left",
                 before=5 * S, after=5 * S, now=at(0))
    assert conn.execute("SELECT count(*) FROM slidewin_streams.shipments").fetchone() == (0,)


def test_retention_still_nibbles_a_joined_stream_and_the_join_stays_exact(
    conn: psycopg.Connection,
) -> None:
    declare(conn, history=timedelta(seconds=30))
    joins.define(conn, "j", left="orders", right="shipments", on="k", join_type="full",
                 before=2 * S, after=2 * S, now=at(0))
    old_l = [(f"o{i}", f"k{i % 3}", at(i)) for i in range(10)]
    old_r = [(f"s{i}", f"k{i % 5}", at(i + 1)) for i in range(10)]
    new_l = [(f"n{i}", f"k{i % 3}", at(200 + i)) for i in range(10)]
    new_r = [(f"m{i}", f"k{i % 5}", at(201 + i)) for i in range(10)]
    batch(conn, "orders", old_l, at(0))
    batch(conn, "shipments", old_r, at(0))
    batch(conn, "orders", new_l, at(0))
    batch(conn, "shipments", new_r, at(0))
    batch(conn, "orders", [("end", "end", at(300))], at(0))
    batch(conn, "shipments", [("end", "end", at(300))], at(0))
    exact_equals_results(conn, "j")
    before = set(joins.results(conn, "j"))
    wall = at(150)  # the old records are past their history, and W has passed them
    assert streams.nibble(conn, "orders", wall) == 10
    assert streams.nibble(conn, "shipments", wall) == 10
    assert conn.execute("SELECT count(*) FROM slidewin_streams.orders").fetchone() == (11,)
    # the results of the records still stored are still their exact join; the old results stay
    # until both their records may be gone, then go
    assert set(joins.results(conn, "j")) == before
    kept = {r for r in before if min(t for t in (r[0], r[2]) if t is not None) >= at(100)}
    assert sorted(joins.exact(conn, "j", at(100), at(1000)), key=repr) == sorted(kept, key=repr)
    assert joins.nibble(conn, "j", wall) == len(before) - len(kept)
    exact_equals_results(conn, "j")
    # and retention's setting does not outlive its own statement
    with pytest.raises(psycopg.errors.ObjectInUse):
        with conn.transaction():
            conn.execute("SELECT slidewin.stream_nibble('orders', %s)", (wall,))
            conn.execute("DELETE FROM slidewin_streams.orders WHERE id = 'end'")


def test_db_init_gives_an_older_stores_joined_streams_the_guard(
    conn: psycopg.Connection,
) -> None:
    paired_and_passed(conn)
    for stream in ("orders", "shipments"):  # as a store made before the guard existed
        conn.execute(f"DROP TRIGGER joins_refuse_change ON slidewin_streams.{stream}")
    conn.execute(CHANGES["delete-left"].replace("'o'", "'nothing'"))  # not refused: no guard
    init_schema(conn)
    with pytest.raises(psycopg.errors.ObjectInUse):
        conn.execute(CHANGES["delete"])
    with pytest.raises(psycopg.errors.ObjectInUse):
        conn.execute(CHANGES["delete-left"])
