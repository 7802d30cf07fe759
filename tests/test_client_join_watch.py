"""The demo's watch of a join (``client.sim.join_demo.JoinWatch``), against a store with records
inserted by hand (the join's trigger pairs them as it pairs the ingest's): a pair's freshness is
its ``emitted_at`` minus when its second record was written, results there before the watch began
are not counted, a pair with a record the writer never announced is unmeasured, and the report
lines show pairs, left-only, late and freshness.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from slidewin.client.sim.join_demo import JoinWatch
from slidewin.db import joins, streams
from slidewin.db.streams import Column


@pytest.fixture(scope="module")
def join_dsn(make_store) -> str:
    dsn = make_store(2)
    with psycopg.connect(dsn, autocommit=True) as c:
        streams.define(c, "orders", key="id", time="ts",
                       columns=[Column("id", "bigint"), Column("ts", "timestamptz")],
                       history=timedelta(hours=1))
        streams.define(c, "shipments", key="id", time="ts",
                       columns=[Column("id", "bigint"), Column("ts", "timestamptz"),
                                Column("order_id", "bigint", True)],
                       history=timedelta(hours=1))
        joins.define(c, "os", left="orders", right="shipments", on="id=order_id",
                     join_type="left", after=timedelta(seconds=30), grace=timedelta(seconds=5))
    return dsn


def test_freshness_is_emitted_at_minus_the_second_record_written(join_dsn):
    t = datetime.now(UTC) - timedelta(seconds=5)
    with psycopg.connect(join_dsn, autocommit=True) as c:
        c.execute("INSERT INTO slidewin_streams.orders (id, ts) VALUES (1, %s)", (t,))
        c.execute("INSERT INTO slidewin_streams.shipments (id, ts, order_id) VALUES (1, %s, 1)",
                  (t,))  # a pair before the watch begins: not counted
        watch = JoinWatch(join_dsn, joins.get_join(c, "os"), left_noun="order",
                          right_noun="shipment", outer="unshipped orders")
        watch.begin()
        written = datetime.now(UTC)
        watch.written("orders", [2, 3], written - timedelta(seconds=2))
        c.execute("INSERT INTO slidewin_streams.orders (id, ts) VALUES (2, %s), (3, %s)",
                  (t, t))
        watch.written("shipments", [2], written)
        c.execute("INSERT INTO slidewin_streams.shipments (id, ts, order_id) VALUES (2, %s, 2)",
                  (t + timedelta(seconds=1),))
        # a shipment the writer never announced: a pair, unmeasured
        c.execute("INSERT INTO slidewin_streams.shipments (id, ts, order_id) VALUES (3, %s, 3)",
                  (t + timedelta(seconds=2),))
        emitted = c.execute("SELECT emitted_at FROM slidewin_joins.os WHERE r_id = 2"
                            ).fetchone()[0]

    lines = watch.lines()
    watch.close()
    assert lines[0].startswith("  Join os: pairs 3 ("), lines  # the join's own count: all
    assert "left-only 0 (unshipped orders, final)" in lines[0], lines
    assert "late 0/0 (orders/shipments)" in lines[0] and "W " in lines[0], lines
    assert watch.pairs_seen == 2 and watch.unmeasured == 1
    assert [s.latency_s for s in watch.samples] == [(emitted - written).total_seconds()]
    assert "over 1 pairs since the last report" in lines[1], lines
    assert [(p.left_key, p.right_key) for p in watch.newest] == [(2, 2), (3, 3)]
