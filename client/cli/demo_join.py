"""The demo's join: two declared streams, ``demo_orders`` and ``demo_shipments``, and the left
interval join ``demo_orders_shipments`` of them, fed and watched beside the built-in stream
(``client.sim.join_demo``).

- ``demo_orders``: id bigint (the key: each order its own), ts, amount numeric(10,2) (the
  measure), customer text;
- ``demo_shipments``: id bigint (the key), ts, order_id bigint (required: the order shipped),
  carrier text; its grace (15 s) lets a shipment written 10 s late be stored, so that the join,
  not the stream, counts it late;
- the join: ``demo_orders LEFT JOIN demo_shipments ON id = order_id``, a shipment from 0 to
  30 s after its order, grace 5 s: a pair as soon as the shipment is ingested, an unshipped
  order (left-only) once W has passed its time + 30 s;
- the writer: orders at --join-rate, a shipment for 80% of them 5 s +- 2 s after the order, 1%
  of those written 10 s late (``client.sim.matched``).

Both streams keep the demo's --historyseconds (else 10 minutes), and at least 95 s: the 35 s a
join refuses to go below (after + grace), and a minute more, because retention deletes by the
wall clock while W trails it by the ingest's lag -- at 35 s an order without a shipment would be
deleted before W passed its time + 30 s, and never get its left-only row.

What the demo declared or defined it removes at the end -- the join first, then the streams --
unless --keep-demo-join; what was there before it stays as it was.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from slidewin.client.cli.context import AppContext
from slidewin.client.sim.config import ClientConfig
from slidewin.client.sim.join_demo import JoinFeed, JoinWatch
from slidewin.client.sim.matched import MatchConfig, MatchedStreams
from slidewin.client.sim.typed_generator import TypedEventGenerator, TypedGeneratorConfig
from slidewin.db import joins, streams
from slidewin.db.errors import ConfigError
from slidewin.db.streams import Column

ORDERS = "demo_orders"
SHIPMENTS = "demo_shipments"
JOIN_NAME = "demo_orders_shipments"
AFTER = timedelta(seconds=30)
GRACE = timedelta(seconds=5)
SHIPMENTS_GRACE = timedelta(seconds=15)
HISTORY = timedelta(minutes=10)  # when --historyseconds is 0
# beyond after + grace: W trails the wall clock (the ingest's lag), retention follows it
HISTORY_MARGIN = timedelta(minutes=1)
MATCH = MatchConfig(SHIPMENTS, "order_id", rate=0.8, delay_s=5.0, jitter_s=2.0,
                    late_rate=0.01, late_by_s=10.0)


def shapes() -> list[tuple[str, list[Column], list[str], timedelta]]:
    """(name, columns, measures, grace) of the two streams; each keyed by id, timed by ts."""
    return [
        (ORDERS, [Column("id", "bigint"), Column("ts", "timestamptz"),
                  Column("amount", "numeric(10,2)"), Column("customer", "text")],
         ["amount"], timedelta(0)),
        (SHIPMENTS, [Column("id", "bigint"), Column("ts", "timestamptz"),
                     Column("order_id", "bigint", True), Column("carrier", "text")],
         [], SHIPMENTS_GRACE),
    ]


@dataclass
class DemoJoin:
    """What the demo set up for its join, and the writer and watch that run it."""

    join: joins.Join
    feed: JoinFeed
    declared: list[str] = field(default_factory=list)  # the streams the demo declared
    defined: bool = False  # whether the demo defined the join


def history(config: ClientConfig) -> timedelta:
    wanted = timedelta(seconds=config.history_s) if config.history_s else HISTORY
    return max(wanted, AFTER + GRACE + HISTORY_MARGIN)


def set_up(app: AppContext, conn: Any, config: ClientConfig, dsn: str,
           rate: float) -> DemoJoin | None:
    """Declare the streams and define the join unless they are there (before the ingest
    starts, so its queries start with it); None with --join-rate 0."""
    if rate <= 0:
        return None
    there = {s.name for s in streams.list_streams(conn, declared_only=True)}
    declared: list[str] = []
    made_join = False
    try:
        for name, columns, measures, grace in shapes():
            if name not in there:
                streams.define(conn, name, key="id", time="ts", columns=columns,
                               measures=measures, history=history(config), grace=grace)
                declared.append(name)
        defined = JOIN_NAME not in {j.name for j in joins.list_joins(conn)}
        if defined:
            join = joins.define(conn, JOIN_NAME, left=ORDERS, right=SHIPMENTS, on="id=order_id",
                                join_type="left", after=AFTER, grace=GRACE)
            made_join = True
        else:
            join = joins.get_join(conn, JOIN_NAME)
        orders = streams.get_stream(conn, ORDERS)
        writer = TypedEventGenerator(TypedGeneratorConfig(config.landing, orders, rate=rate,
                                                          seed=config.seed, keys=0))
        try:
            matched = MatchedStreams(writer, streams.get_stream(conn, SHIPMENTS), MATCH)
        except ConfigError as exc:  # streams of these names, declared otherwise
            raise ConfigError(
                f"{ORDERS} and {SHIPMENTS} are there but not as the demo declares them ({exc}); "
                f"drop them (`slidewin streams drop NAME --yes`) or run with --join-rate 0"
            ) from None
    except Exception:
        with contextlib.suppress(Exception):  # leave nothing half made
            if made_join:
                joins.drop(conn, JOIN_NAME)
            for name in reversed(declared):
                streams.drop(conn, name)
        raise
    watch = JoinWatch(dsn, join, left_noun="order", right_noun="shipment",
                      outer="unshipped orders")
    made = [*(f"stream {n}" for n in declared), *([f"join {JOIN_NAME}"] if defined else [])]
    app.progress(f"join {JOIN_NAME} ({'made: ' + ', '.join(made) if made else 'found'}): "
                 f"{ORDERS} left join {SHIPMENTS} on id=order_id, a shipment 0-"
                 f"{AFTER.total_seconds():g}s after its order, grace {GRACE.total_seconds():g}s; "
                 f"{rate:g} orders/s, a shipment for {MATCH.describe()}")
    return DemoJoin(join, JoinFeed(matched, watch), declared, defined)


def leave(app: AppContext, demo: DemoJoin, keep: bool) -> None:
    """Remove what the demo made (the join, then the streams), or say that it stays."""
    made = [*([f"join {JOIN_NAME}"] if demo.defined else []),
            *(f"stream {n}" for n in demo.declared)]
    if not made:
        return
    if keep:
        app.progress(f"{', '.join(made)} stay: every later ingest reads <landing>/{ORDERS}/ and "
                     f"<landing>/{SHIPMENTS}/ and pairs them; `slidewin joins show {JOIN_NAME} "
                     f"--last 10m` shows the results, `slidewin joins drop {JOIN_NAME} --yes`, "
                     "then `slidewin streams drop NAME --yes` remove them")
        return
    with contextlib.suppress(Exception), app.connect() as conn:  # a failure is reported already
        if demo.defined:
            joins.drop(conn, JOIN_NAME)
            app.progress(f"join {JOIN_NAME} dropped (the demo defined it; --keep-demo-join "
                         "keeps it)")
        for name in demo.declared:
            streams.drop(conn, name)
            app.progress(f"stream {name} dropped (the demo declared it; --keep-demo-join "
                         "keeps it)")
