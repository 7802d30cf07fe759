"""Run-everywhere retention: rounds of bounded nibble deletes over every partition.

A *round* lists the partitions afresh (``slidewin.partition_keys()``, VoltDB's
@GetPartitionKeys, so a partition added meanwhile is covered by the next round), computes the
per-partition row targets when the policy has a row limit, and calls ``slidewin.nibble`` once per
partition: at most ``chunk`` of its oldest rows that are older than ``now - history`` or beyond
its target. A round that deleted a full chunk somewhere *filled* it: more work may be waiting, so
``run_until_caught_up`` starts the next round at once; otherwise it returns and the scheduler
waits ``yield`` before the next run (VoltDB's deleteyieldtime).

Single flight: every round holds the job lock ``retention`` (a row of ``slidewin.job_locks``
whose holder is the round's backend, ``slidewin.job_lock_take``; one per database), so two
schedulers -- or two threads -- never run rounds at once. Without the lock two rounds could both
read a partition's excess, then each delete a chunk of it: an overshoot. With it, each round
sees the previous round's committed deletes. Only a role that may update that row (the jobs
role, the owner) can hold it: a reader cannot stop retention, as it could by holding an
advisory lock. A round that finds the lock held says by whom (``RoundResult.held_by``, a pid).

Each nibble commits on its own (autocommit connection), so row locks are held for one chunk only
and the rollups (kept exact by the delete trigger) move in step.

Session settings: the first round on a connection sets ``random_page_cost = 1.1`` and turns JIT
off for that session (``prepare_session``). The nibble deletes its victims by ctid; with the
default cost (4, for spinning disks) the planner prefers a sequential scan of the whole partition
over fetching a chunk of ctids -- work that grows with the partition, not the chunk. The
retained window is hot in memory, where 1.1 is the honest figure, and the TID scan wins.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime
from threading import Event
from typing import TypeVar

import psycopg

from slidewin.db import joins, sessions, streams
from slidewin.db.clock import Clock, utc_now
from slidewin.db.connect import ThreadConnections
from slidewin.db.retention import nibble, partition_keys, row_targets
from slidewin.jobs.config import RetentionPolicy
from slidewin.jobs.errors import ConnectionModeError

LOCK_NAME = "retention"  # the row of slidewin.job_locks
WAIT_POLL_S = 0.02  # wait=True: how often to try the lock again
SESSION_SETTINGS = (("random_page_cost", "1.1"), ("jit", "off"))

_prepared: weakref.WeakSet[psycopg.Connection] = weakref.WeakSet()

T = TypeVar("T")


@dataclass(frozen=True)
class RoundResult:
    """What one round did.

    ``deleted``: rows deleted per partition (every partition of the round, zeros included).
    ``targets``: the per-partition row targets in force (None when the policy has no row limit).
    ``filled``: some partition's nibble deleted a full chunk, so more work may be waiting.
    ``skipped``: another round held the lock; this one did nothing.
    ``nibble_ms``: wall time of each partition's nibble call, in milliseconds.
    ``held_by``: when skipped, the pid of the backend holding the lock (None if unknown).
    """

    now: datetime
    deleted: dict[int, int]
    targets: dict[int, int] | None
    filled: bool
    skipped: bool = False
    nibble_ms: dict[int, float] = field(default_factory=dict)
    held_by: int | None = None

    @property
    def total(self) -> int:
        return sum(self.deleted.values())


@dataclass(frozen=True)
class CatchUpResult:
    """What ``run_until_caught_up`` did: rounds run, rows deleted per partition (summed)."""

    rounds: int
    deleted: dict[int, int]
    caught_up: bool
    skipped: bool
    last: RoundResult | None

    @property
    def held_by(self) -> int | None:
        """When skipped, the pid of the backend that held the retention lock (or None)."""
        return self.last.held_by if self.last is not None and self.skipped else None

    @property
    def total(self) -> int:
        return sum(self.deleted.values())


class NibblePool:
    """Worker threads, each with its own autocommit connection, to nibble several partitions of
    a round at once (``policy.workers``). The round's lock stays on the caller's connection, so
    rounds are still single-flight; within a round each partition is nibbled by one worker."""

    def __init__(self, dsn: str, workers: int) -> None:
        self.workers = workers
        self._conns = ThreadConnections(dsn, prepare_session)
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="nibble")

    def map(self, fn: Callable[[psycopg.Connection, int], T], parts: list[int]) -> list[T]:
        """``fn(conn, part)`` for every part; waits for all of them even when one fails, so
        no nibble of this round is still running once the round releases its lock."""
        futures = [
            self._executor.submit(self._call, fn, part) for part in parts
        ]
        wait(futures)
        return [f.result() for f in futures]

    def _call(self, fn: Callable[[psycopg.Connection, int], T], part: int) -> T:
        return fn(self._conns.get(), part)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        self._conns.close_all()


def run_round(
    conn: psycopg.Connection,
    policy: RetentionPolicy,
    now: datetime,
    *,
    wait: bool = False,
    pool: NibblePool | None = None,
) -> RoundResult:
    """One round over every partition, under the retention lock.

    ``conn`` must be in autocommit mode. ``now`` is the clock (UTC-aware): rows older than
    ``now - history`` go. With ``wait=False`` a round that finds the lock held returns at once
    with ``skipped=True``; with ``wait=True`` it waits for the lock. With a ``pool`` the
    partitions are nibbled by its workers, several at once; without, one after another.
    """
    _check_conn(conn)
    _check_now(now)
    prepare_session(conn)
    taken, holder = _acquire(conn, wait)
    if not taken:
        return RoundResult(now=now, deleted={}, targets=None, filled=False, skipped=True,
                           held_by=holder)
    try:
        return _nibble_all(conn, policy, now, pool)
    finally:
        _release(conn)


def run_until_caught_up(
    conn: psycopg.Connection,
    policy: RetentionPolicy,
    now: datetime | Clock = utc_now,
    *,
    stop: Event | None = None,
    max_rounds: int = 1000,
    wait: bool = False,
    on_round: Callable[[RoundResult], None] | None = None,
    pool: NibblePool | None = None,
) -> CatchUpResult:
    """Run rounds back to back while any partition fills its chunk; then return.

    ``now`` is a fixed datetime or a clock called before each round (default the wall clock;
    tests pin it). Stops early when ``stop`` is set (checked between rounds), after
    ``max_rounds`` (so one scheduler run stays bounded), or when a round is skipped because
    another holds the lock. ``caught_up`` is True when the last round filled no chunk.
    """
    clock = _clock(now)
    totals: dict[int, int] = {}
    last: RoundResult | None = None
    rounds = 0
    while rounds < max_rounds and not (stop is not None and stop.is_set()):
        last = run_round(conn, policy, clock(), wait=wait, pool=pool)
        rounds += 1
        _add(totals, last.deleted)
        if on_round is not None:
            on_round(last)
        if last.skipped or not last.filled:
            break
    caught_up = last is not None and not last.skipped and not last.filled
    skipped = last is not None and last.skipped
    return CatchUpResult(rounds, totals, caught_up, skipped, last)


def expire_sessions(conn: psycopg.Connection, chunk: int, max_rounds: int = 1000) -> int:
    """Session windows past their own retention (``db.sessions.expire``), in calls of at most
    ``chunk`` sessions per definition, while a call fills its chunk; the sessions deleted.
    Each call commits on its own, like a nibble."""
    total = 0
    for _ in range(max_rounds):
        deleted = sessions.expire(conn, chunk)
        total += deleted
        if deleted < chunk:
            break
    return total


def nibble_streams(
    conn: psycopg.Connection, now: datetime, chunk: int, max_rounds: int = 1000,
    on_nibble: Callable[[str, int, float], None] | None = None,
) -> dict[str, int]:
    """Each declared stream with a history or a row limit: its events older than ``now`` -
    history or beyond its newest ``max_rows``, in calls of at most ``chunk`` rows
    (``db.streams.nibble``, each committing on its own), while a call fills its chunk; the rows
    deleted per stream (streams with nothing due left out). ``on_nibble`` hears of each call:
    (stream, rows deleted, wall time in ms)."""
    deleted: dict[str, int] = {}
    for stream in streams.list_streams(conn, declared_only=True):
        if stream.history is None and stream.max_rows is None:
            continue
        for _ in range(max_rounds):
            began = time.perf_counter()
            n = streams.nibble(conn, stream.name, now, chunk)
            if on_nibble is not None:
                on_nibble(stream.name, n, (time.perf_counter() - began) * 1000)
            if n:
                deleted[stream.name] = deleted.get(stream.name, 0) + n
            if n < chunk:
                break
    return deleted


def tick_joins(
    conn: psycopg.Connection, now: datetime, chunk: int, max_rounds: int = 1000
) -> dict[str, int]:
    """The joins' share of the job: move every interval join's W (an input gone idle stops
    holding it back, so outer rows become final without new data), then delete, in calls of at
    most ``chunk`` rows, the results whose inputs have both aged out; the rows deleted per join
    (joins with nothing due left out)."""
    joins.advance(conn, now)
    deleted: dict[str, int] = {}
    for join in joins.list_joins(conn):
        for _ in range(max_rounds):
            n = joins.nibble(conn, join.name, now, chunk)
            if n:
                deleted[join.name] = deleted.get(join.name, 0) + n
            if n < chunk:
                break
    return deleted


def prepare_session(conn: psycopg.Connection) -> None:
    """Apply SESSION_SETTINGS to ``conn`` once (see the module docstring for why)."""
    if conn in _prepared:
        return
    for name, value in SESSION_SETTINGS:
        conn.execute("SELECT set_config(%s, %s, false)", (name, value))
    _prepared.add(conn)


def _nibble_all(
    conn: psycopg.Connection, policy: RetentionPolicy, now: datetime, pool: NibblePool | None
) -> RoundResult:
    limit = policy.row_limit
    targets = row_targets(conn, limit, policy.split) if limit else None
    keys = sorted(targets) if targets is not None else partition_keys(conn)
    cutoff = now - policy.history_limit if policy.history_limit else None

    def one(c: psycopg.Connection, part: int) -> tuple[int, int, float]:
        started = time.perf_counter()
        target = targets[part] if targets is not None else None
        n = nibble(c, part, cutoff, target, policy.chunk)
        return part, n, (time.perf_counter() - started) * 1000.0

    done = pool.map(one, keys) if pool is not None else [one(conn, p) for p in keys]
    deleted = {part: n for part, n, _ in done}
    timings = {part: ms for part, _, ms in done}
    filled = any(n >= policy.chunk for n in deleted.values())
    return RoundResult(now, deleted, targets, filled, False, timings)


def _acquire(conn: psycopg.Connection, wait: bool) -> tuple[bool, int | None]:
    """(True, None) once this session holds the retention lock; (False, holder pid) when another
    does and ``wait`` is False. ``wait``: try again every WAIT_POLL_S until it is free."""
    while True:
        row = conn.execute("SELECT taken, holder FROM slidewin.job_lock_take(%s)",
                           (LOCK_NAME,)).fetchone()
        if row is not None and row[0]:
            return True, None
        if not wait:
            return False, row[1] if row is not None else None
        time.sleep(WAIT_POLL_S)


def _release(conn: psycopg.Connection) -> None:
    if conn.closed or conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
        return  # a session that ends holds no lock (slidewin.job_lock_take)
    conn.execute("SELECT slidewin.job_lock_release(%s)", (LOCK_NAME,))


def _check_conn(conn: psycopg.Connection) -> None:
    if not conn.autocommit:
        raise ConnectionModeError(
            "retention rounds need an autocommit connection (each nibble commits on its own so "
            "its row locks stay short); connect with autocommit=True"
        )


def _check_now(now: datetime) -> None:
    if not isinstance(now, datetime) or now.tzinfo is None:
        raise ValueError(f"now must be a timezone-aware datetime, got {now!r}")


def _clock(now: datetime | Clock) -> Clock:
    if isinstance(now, datetime):
        return lambda: now
    return now


def _add(totals: dict[int, int], deleted: dict[int, int]) -> None:
    for part, n in deleted.items():
        totals[part] = totals.get(part, 0) + n
