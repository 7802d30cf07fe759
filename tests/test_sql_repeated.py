"""Every SQL function answers the same on its tenth call on one connection as on its first.

PostgreSQL plans a PL/pgSQL statement (and a prepared statement) anew for its first five runs,
then may switch to one generic plan, whose expressions it estimates by running their stable
functions: ``coalesce(p_name, slidewin.session_only())`` once failed from the sixth call on
("there are 2 session windows") although a name was given. A test that calls each function
once on a fresh connection cannot see that, so here each one is called twelve times on one
connection, with session windows defined, data in every table it reads, and its answers
compared with the first call's.

``CALLS`` must name every function in the schema: a new function without a sample call fails
``test_every_function_has_a_sample_call``.
"""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from slidewin.db import joins, sessions, streams
from slidewin.db.streams import Column
from tests import store_fixtures
from tests.store_fixtures import at, put

small_store_dsn = store_fixtures.small_store_dsn
sconn = store_fixtures.sconn

REPEAT = 12
S = timedelta(seconds=1)
ROWS = ("ARRAY[%s]::timestamptz[], ARRAY[0]::smallint[], ARRAY[1]::bigint[], "
        "ARRAY[5]::numeric[], ARRAY[5]::bigint[], ARRAY[5]::bigint[]")
PAIR = (f"WITH a AS (SELECT slidewin.rollups_{{grain}}add({ROWS})) "
        f"SELECT slidewin.rollups_{{grain}}subtract({ROWS}) FROM a")
# function -> (SQL with %s placeholders, params as a function of the call number i, whether the
# answer may change from call to call -- writers, and readers of what the writers change)
CALLS: dict[str, tuple[str, object, bool]] = {
    "attach_rollup_triggers": ("SELECT slidewin.attach_rollup_triggers('slidewin.events_p000')",
                               (), False),
    "attach_session_trigger": ("SELECT slidewin.attach_session_trigger('slidewin.events_p000')",
                               (), False),
    "check_chunk": ("SELECT slidewin.check_chunk(%s)", (100,), False),
    "check_cutoff": ("SELECT slidewin.check_cutoff(%s)", (at(0),), False),
    "check_duration": ("SELECT slidewin.check_duration('grace', %s)", (5 * S,), False),
    "check_key": ("SELECT slidewin.check_key(%s)", ("a",), False),
    "check_count_windows": ("SELECT slidewin.check_count_windows(%s, %s, %s)", (4, 2, 10), False),
    # refused every time: no key index on sensors
    "check_key_index": ("SELECT slidewin.check_key_index(%s)", ("sensors",), None),
    "check_partition": ("SELECT slidewin.check_partition(%s)", (1,), False),
    "check_target_rows": ("SELECT slidewin.check_target_rows(%s)", (10,), False),
    "check_window": ("SELECT slidewin.check_window(%s)", (30,), False),
    "check_window_range": ("SELECT slidewin.check_window_range(%s, %s, %s)",
                           (at(0), at(60), 10), False),
    "check_window_work": ("SELECT slidewin.check_window_work('hopping', %s, %s, %s, "
                          "ARRAY[1, 10, 60, 3600])", (60, 10, 360), False),
    "check_window_spec": ("SELECT slidewin.check_window_spec(%s, %s)", (10, 5), False),
    "complete_up_to": ("SELECT slidewin.complete_up_to()", (), False),
    "count_windows": ("SELECT * FROM slidewin.count_windows(%s, %s, %s)", (2, 1, 4), False),
    "delete_after_date": ("SELECT slidewin.delete_after_date(%s, %s, %s)",
                          (0, at(-100), 10), False),
    "delete_oldest_to_target": ("SELECT slidewin.delete_oldest_to_target(%s, %s, %s)",
                                (0, 1000, 10), False),
    "delete_to_limits": ("SELECT slidewin.delete_to_limits(%s, %s, %s, %s)",
                         (0, at(-100), 1000, 10), False),
    "ensure_partitions": ("SELECT slidewin.ensure_partitions(%s)", (3,), False),
    "epoch_us_array": ("SELECT slidewin.epoch_us_array(%s)", ([0, 1],), False),
    "grain_floor": ("SELECT slidewin.grain_floor(%s, %s)", (at(7), 10), False),
    "hopping": ("SELECT * FROM slidewin.hopping(%s, %s, %s, %s)", (10 * S, 5 * S, at(0), at(60)),
                False),
    "ingest_advance": ("SELECT slidewin.ingest_advance(%s, %s, %s, %s)",
                       ("events", at(40), at(40), 5 * S), False),
    "insert_and_delete_after_date": (
        "SELECT slidewin.insert_and_delete_after_date(%s, %s, %s, %s, %s)",
        lambda i: ("w", i, at(41 + i), at(-100), 10), True),
    "insert_and_delete_oldest_to_target": (
        "SELECT slidewin.insert_and_delete_oldest_to_target(%s, %s, %s, %s, %s)",
        lambda i: ("x", i, at(41 + i), 1000, 10), True),
    "insert_event": ("SELECT slidewin.insert_event(%s, %s, %s)",
                     lambda i: ("y", i, at(41 + i)), True),
    "key_index": ("SELECT slidewin.key_index(%s), slidewin.key_index(%s, %s)",
                  (None, None, "sensors"), False),
    "key_index_name": ("SELECT * FROM slidewin.key_index_name(%s)", ("sensors",), False),
    "key_index_status": ("SELECT * FROM slidewin.key_index_status()", (), False),
    "key_window": ("SELECT * FROM slidewin.key_window(%s, 'tumbling', %s, NULL, %s, %s)",
                   ("a", 10 * S, at(0), at(60)), False),
    "key_windows_at": ("SELECT * FROM slidewin.key_windows_at(%s, %s, %s, %s)",
                       ("a", 10 * S, 5 * S, at(12)), False),
    "nibble": ("SELECT slidewin.nibble(%s, %s, %s, %s)", (0, at(-100), None, 10), False),
    "partition_keys": ("SELECT slidewin.partition_keys()", (), False),
    "partition_name": ("SELECT slidewin.partition_name(%s)", (2,), False),
    "partition_of": ("SELECT slidewin.partition_of(%s), slidewin.partition_of(%s, 8)",
                     ("a", "a"), False),
    "record_job_run": (
        "SELECT slidewin.record_job_run('j', 'retention', %s, %s, 1, '{}', true, false) > 0",
        (at(0), at(1)), False),
    "refresh_minute_history": ("SELECT slidewin.refresh_minute_history()", (), False),
    # roles: a bad prefix and a set that does not exist are refused; with no set made here,
    # regrant has nothing to do (tests/test_roles.py makes a set and checks what it grants)
    "create_roles": ("SELECT * FROM slidewin.create_roles(%s)", ("Not-A-Prefix",), None),
    "create_role_set": ("SELECT * FROM slidewin.create_role_set(%s)", ("Not-A-Prefix",), None),
    "session_def_forget": ("SELECT slidewin.session_def_forget(%s)", (-1,), False),
    "registry_regenerate": ("SELECT slidewin.registry_regenerate()", (), False),
    "role_handover": ("SELECT * FROM slidewin.role_handover(%s)", ("no_such_set",), False),
    "grant_roles": ("SELECT slidewin.grant_roles(%s)", ("no_such_set",), None),
    "regrant_roles": ("SELECT slidewin.regrant_roles()", (), False),
    "role_grants": ("SELECT * FROM slidewin.role_grants(%s)", ("no_such_set",), False),
    "role_objects": ("SELECT slidewin.role_objects(ARRAY['events', 'rollups'])::text "
                     "ORDER BY 1", (), False),
    "job_lock_take": ("SELECT * FROM slidewin.job_lock_take('retention')", (), False),
    "job_lock_release": ("SELECT slidewin.job_lock_release('retention')", (), True),
    "role_progress": ("SELECT rel::text, role, privileges FROM slidewin.role_progress(%s, %s) "
                      "ORDER BY 1, 2", ("no_such_ingest", "no_such_jobs"), False),
    "retention_targets": ("SELECT * FROM slidewin.retention_targets(%s, %s)",
                          (1000, "global"), False),
    "retired_through": ("SELECT slidewin.retired_through()", (), False),
    "rollup_grains": ("SELECT slidewin.rollup_grains()", (), False),
    # adding then subtracting the same partial leaves the rollups as they were
    "rollups_add": (PAIR.format(grain=""), (at(500), at(500)), False),
    "rollups_subtract": (PAIR.format(grain=""), (at(501), at(501)), False),
    "rollups_coarse_add": (PAIR.format(grain="coarse_"), (at(600), at(600)), False),
    "rollups_coarse_subtract": (PAIR.format(grain="coarse_"), (at(601), at(601)), False),
    "session_begin": ("SELECT (slidewin.session_begin(id)).name FROM slidewin.session_defs "
                      "WHERE name = %s", ("visits",), False),
    "session_changes": ("SELECT * FROM slidewin.session_changes(%s, %s)", ("visits", 0), False),
    "session_def": ("SELECT (slidewin.session_def(%s)).name", ("visits",), False),
    "session_cost": ("SELECT * FROM slidewin.session_cost(%s)", (100,), False),
    "session_define": ("SELECT slidewin.session_define(%s, %s) > 0",
                       lambda i: (f"extra{i}", 10 * S), True),
    "session_is_final": ("SELECT slidewin.session_is_final(%s, d) FROM slidewin.session_defs d "
                         "WHERE name = 'visits'", (at(0),), False),
    "session_late_detail": ("SELECT slidewin.session_late_detail(d, %s) FROM "
                            "slidewin.session_defs d WHERE name = 'visits'", (at(0),), False),
    "session_only": ("SELECT slidewin.session_only()", (), None),  # refuses: two definitions
    "session_remove": ("SELECT slidewin.session_remove(%s, %s)", (lambda i: (f"extra{i}", at(0))),
                       True),
    "session_stats": ("SELECT * FROM slidewin.session_stats(%s)", ("visits",), False),
    "session_triggers": ("SELECT slidewin.session_triggers(%s)", ("sensors",), False),
    "sessions": ("SELECT * FROM slidewin.sessions(%s, %s)", ("a", "visits"), False),
    "sessions_apply": ("SELECT slidewin.sessions_apply(id, ARRAY['q'], ARRAY[%s::timestamptz], "
                       "ARRAY[%s::timestamptz], '{1}', '{1}', '{1}', '{1}') FROM "
                       "slidewin.session_defs WHERE name = 'visits'",
                       lambda i: (at(100 + 20 * i), at(100 + 20 * i)), True),
    "sessions_closed": ("SELECT * FROM slidewin.sessions_closed(%s, %s)", ("visits", None),
                        False),
    "sessions_expire": ("SELECT slidewin.sessions_expire(%s)", (10,), False),
    "sessions_late": ("SELECT slidewin.sessions_late(id, ARRAY['q'], '{1}', "
                      "ARRAY[%s::timestamptz]) FROM slidewin.session_defs WHERE name = 'visits'",
                      (at(-50),), False),
    "sliding": ("SELECT * FROM slidewin.sliding(%s, %s, %s)", (10 * S, at(0), at(60)), False),
    "stream_begin": ("SELECT * FROM slidewin.stream_begin(%s)", ("events",), False),
    "check_stream_name": ("SELECT slidewin.check_stream_name('stream', %s)", ("abc",), False),
    "stream_type": ("SELECT slidewin.stream_type('c', %s)", ("decimal(12, 2)",), False),
    "stream_get": ("SELECT (slidewin.stream_get(%s)).measures", ("sensors",), False),
    "stream_row": ("SELECT (slidewin.stream_row(%s)).key_column", ("events",), False),
    "stream_table": ("SELECT slidewin.stream_table(%s)", ("sensors",), False),
    "stream_time_prefix": ("SELECT slidewin.stream_time_prefix(%s, 'r')", ("events",), False),
    "stream_measure_type": ("SELECT slidewin.stream_measure_type(columns, %s, key_column, "
                            "time_column) FROM slidewin.streams WHERE name = 'sensors'",
                            ("w",), False),
    "stream_measure_ddl": ("SELECT slidewin.stream_measure_ddl(%s, 'double precision')", ("m",),
                           False),
    "stream_rollup_sql": ("SELECT slidewin.stream_rollup_sql(%s)", ("sensors",), False),
    "stream_define": ("SELECT (slidewin.stream_define(%s, 'k', 'ts', '[{\"name\": \"k\"}]'))"
                      ".name", lambda i: (f"def{i}",), True),
    "stream_add_column": ("SELECT (slidewin.stream_add_column('sensors', %s, 'bigint')).name",
                          lambda i: (f"col{i}",), True),
    "stream_add_measure": ("WITH c AS (SELECT slidewin.stream_add_column('sensors', %s, 'bigint')"
                           ") SELECT (slidewin.stream_add_measure('sensors', %s)).name FROM c",
                           lambda i: (f"m{i}", f"m{i}"), True),
    "stream_drop": ("SELECT slidewin.stream_drop((slidewin.stream_define(%s, 'k', 'ts', "
                    "'[{\"name\": \"k\"}]')).name)", lambda i: (f"gone{i}",), True),
    "stream_measure": ("SELECT * FROM slidewin.stream_measure('sensors', %s)", ("w",), False),
    "stream_total": ("SELECT slidewin.stream_total(%s, 0, 1, 0)", (5,), False),
    "stream_buckets": ("SELECT * FROM slidewin.stream_buckets('sensors', %s, 10, %s, %s)",
                       ("v", at(0), at(60)), False),
    "stream_window_state": ("SELECT * FROM slidewin.stream_window_state('sensors', %s, %s)",
                            (10, 5), False),
    "stream_hopping": ("SELECT * FROM slidewin.stream_hopping('sensors', 'v', %s, %s, %s, %s)",
                       (10 * S, 5 * S, at(0), at(60)), False),
    "stream_tumbling": ("SELECT * FROM slidewin.stream_tumbling('sensors', 'w', %s, %s, %s)",
                        (10 * S, at(0), at(60)), False),
    # the built-in stream's four grains (sensors' two: stream_hopping_series' sample)
    "stream_pieces": ("SELECT * FROM slidewin.stream_pieces('events', 'val', "
                      "ARRAY[%s, %s, %s]::timestamptz[])", (at(3), at(25), at(61)), False),
    "stream_grains": ("SELECT slidewin.stream_grains(%s)", ("events",), False),
    "stream_rollups": ("SELECT slidewin.stream_rollups(%s, 60, 'true')", ("events",), False),
    "rollup_range": ("SELECT * FROM slidewin.rollup_range(%s, %s)", (at(0), at(60)), False),
    "stream_bucket_columns": ("SELECT slidewin.stream_bucket_columns('sensors', %s, 10)",
                              ("v",), False),
    "stream_windows_at": ("SELECT * FROM slidewin.stream_windows_at('sensors', 'v', %s, %s, %s)",
                          (10 * S, 5 * S, at(12)), False),
    "stream_hopping_series": ("SELECT * FROM slidewin.stream_hopping_series('sensors', 'v', %s, "
                              "%s, %s, %s)", (25, 10, at(0), at(50)), False),
    "stream_sliding": ("SELECT * FROM slidewin.stream_sliding('sensors', 'v', %s, %s, %s)",
                       (10 * S, at(0), at(60)), False),
    "stream_summary": ("SELECT * FROM slidewin.stream_summary('sensors', 'v', %s, %s)",
                       (at(0), at(60)), False),
    "stream_count_windows": ("SELECT * FROM slidewin.stream_count_windows('sensors', 'v', %s, "
                             "%s, %s)", (4, 2, 10), False),
    "stream_nibble": ("SELECT slidewin.stream_nibble('sensors', %s, 10)", (at(0),), False),
    "stream_time": ("SELECT slidewin.stream_time()", (), False),
    "counter_add": ("SELECT slidewin.counter_add('job_runs', %s::jsonb, 0)",
                    ('{"kind": "x", "outcome": "ok"}',), False),
    "job_outcome": ("SELECT slidewin.job_outcome(%s, %s)", (None, True), False),
    "duration_text": ("SELECT slidewin.duration_text(%s)", (timedelta(minutes=4),), False),
    "join_get": ("SELECT (slidewin.join_get(%s)).kind", ("sp",), False),
    "join_column_type": ("SELECT slidewin.join_column_type(s, %s, 'on') FROM slidewin.streams s "
                         "WHERE name = 'sensors'", ("v",), False),
    "join_index": ("SELECT slidewin.join_index('sensors', %s)", ("k",), False),
    "join_tables": ("SELECT slidewin.join_tables(j.name) FROM (SELECT (slidewin.join_define(%s, "
                    "'sensors', 'parcels', 'k', p_kind => 'rows', p_n_rows => 2)).name) j",
                    lambda i: (f"jt{i}",), True),
    "join_sql": ("SELECT slidewin.join_sql(%s)", ("sp",), False),
    "join_triggers": ("SELECT slidewin.join_triggers(%s)", ("sensors",), False),
    "join_trigger": ("SELECT slidewin.join_trigger('slidewin_streams.sensors', 'sensors', "
                     "'joins_on_insert', true, 'AFTER INSERT', %s)",
                     ("REFERENCING NEW TABLE AS new_rows ",), False),
    "join_lock_streams": ("SELECT slidewin.join_lock_streams(%s, %s)", ("sensors", "parcels"),
                          False),
    "join_keep_from": ("SELECT slidewin.join_keep_from(%s)", ("sensors",), False),
    "join_watermark": ("SELECT slidewin.join_watermark(j, %s) FROM slidewin.joins j "
                       "WHERE name = 'sp'", (at(40),), False),
    "join_advance": ("SELECT slidewin.join_advance(%s, %s)", ("sp", at(40)), False),
    "joins_advance": ("SELECT slidewin.joins_advance(%s, %s)", (None, at(40)), False),
    "join_backfill": ("SELECT slidewin.join_backfill(%s, %s)", ("sp", at(40)), False),
    "join_define": ("SELECT (slidewin.join_define(%s, 'sensors', 'parcels', 'k', "
                    "p_join_type => 'left', p_before => '1 s')).name", lambda i: (f"jd{i}",), True),
    "join_status": ("SELECT * FROM slidewin.join_status(%s)", ("sp",), False),
    "join_show": ("SELECT * FROM slidewin.join_show(%s, %s, %s, 50)", ("sp", at(0), at(60)),
                  False),
    "join_since": ("SELECT * FROM slidewin.join_since(%s, 0, 50)", ("sp",), False),
    "join_exact": ("SELECT * FROM slidewin.join_exact(%s, %s, %s) ORDER BY 1, 2, 3, 4",
                   ("sp", at(0), at(60)), False),
    "join_nibble": ("SELECT slidewin.join_nibble(%s, %s, 10)", ("sp", at(0)), False),
    "join_drop": ("SELECT slidewin.join_drop((slidewin.join_define(%s, 'sensors', 'parcels', "
                  "'k')).name)", lambda i: (f"jx{i}",), True),
    "tumbling": ("SELECT * FROM slidewin.tumbling(%s, %s, %s)", (10 * S, at(0), at(60)), False),
    "window_avg": ("SELECT slidewin.window_avg(%s, %s)", (30, at(40)), False),
    "window_max": ("SELECT slidewin.window_max(%s, %s)", (30, at(40)), False),
    "window_timed_out": ("SELECT slidewin.window_timed_out('hopping', %s)",
                         ("canceling statement due to user request",), False),
    "window_work": ("SELECT slidewin.window_work(%s, %s, %s)", (604800, 1, 86400), False),
    "window_work_limit": ("SELECT slidewin.window_work_limit()", (), False),
    "window_seconds": ("SELECT slidewin.window_seconds('size', %s)", (10 * S,), False),
    "window_status": ("SELECT * FROM slidewin.window_status(%s, %s)", (at(0), at(60)), False),
    "window_summary": ("SELECT * FROM slidewin.window_summary(%s, %s)", (30, at(40)), False),
    "windows_at": ("SELECT * FROM slidewin.windows_at(%s, %s, %s)", (10 * S, 5 * S, at(12)),
                   False),
}
# sets of buckets for other functions to order: the same rows each call, in any order (a
# generic plan may aggregate by hash where the first plans sorted)
UNORDERED = {"stream_buckets", "stream_pieces", "stream_hopping_series"}
# run by the statements above rather than called: triggers, and the job store's own
TRIGGERS = {"rollups_on_insert", "rollups_on_delete", "rollups_on_update", "rollups_on_truncate",
            "sessions_on_insert", "stream_rollups_on_insert", "stream_rollups_on_delete",
            "stream_rollups_on_truncate", "joins_on_insert", "join_check_history",
            "count_dead_letters", "count_ingest_batches", "joins_refuse_change",
            "stream_check_retention", "retention_settings_check", "registry_guard"}


@pytest.fixture
def busy(sconn: psycopg.Connection) -> psycopg.Connection:
    """A store with events, a watermark and session windows -- two over events, one over a
    declared stream (so no name may be left out)."""
    sessions.define(sconn, sessions.SessionDef("visits", 10 * S, 5 * S, timedelta(minutes=10)))
    sessions.define(sconn, sessions.SessionDef("clicks", 30 * S, 0 * S, timedelta(minutes=10)))
    put(sconn, [(k, i, at(i * 1.5)) for i in range(27) for k in ("a", "b")])
    sconn.execute("SELECT slidewin.ingest_advance('events', %s, %s, %s)", (at(40), at(40), 5 * S))
    streams.define(sconn, "sensors", key="k", time="ts", measures=["v", "w"], history=60 * S,
                   columns=[Column("k", "text"), Column("v", "double"), Column("w", "bigint")])
    sessions.define(sconn, sessions.SessionDef("readings", 10 * S, 5 * S, timedelta(minutes=10),
                                               stream="sensors"))  # the trigger runs dynamic SQL
    sconn.execute("INSERT INTO slidewin_streams.sensors (k, ts, v, w) "
                  "SELECT 'k' || (i %% 3), %s + i * interval '1.5 s', i / 7.0, i FROM "
                  "generate_series(0, 40) i", (at(0),))
    sconn.execute("SELECT slidewin.ingest_advance('sensors', %s, %s, %s)", (at(40), at(40), S))
    streams.define(sconn, "parcels", key="p", time="ts", history=60 * S,
                   columns=[Column("p", "text"), Column("k", "text")])
    sconn.execute("INSERT INTO slidewin_streams.parcels (p, k, ts) SELECT 'p' || i, "
                  "'k' || (i %% 4), %s + i * interval '2 s' FROM generate_series(0, 20) i",
                  (at(0),))
    sconn.execute("SELECT slidewin.ingest_advance('parcels', %s, %s, %s)", (at(40), at(40), S))
    joins.define(sconn, "sp", left="sensors", right="parcels", on="k", join_type="full",
                 before=5 * S, after=3 * S, now=at(40))
    return sconn


def _schema_functions(conn: psycopg.Connection) -> set[str]:
    rows = conn.execute(
        "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = 'slidewin'"
    ).fetchall()
    return {r[0] for r in rows}


def test_every_function_has_a_sample_call(sconn: psycopg.Connection) -> None:
    assert _schema_functions(sconn) - TRIGGERS == set(CALLS)


# slow: 130 cases of 12 calls, each on a freshly built busy store (20-35 s in all)
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CALLS))
def test_twelve_calls_on_one_connection(busy: psycopg.Connection, name: str) -> None:
    text, params, changing = CALLS[name]
    answers = []
    for i in range(REPEAT):
        args = params(i) if callable(params) else params
        if changing is None:  # it must refuse every time, with the same words
            with pytest.raises(psycopg.Error) as refused:
                busy.execute(text, args)
            answers.append(refused.value.diag.message_primary)
            continue
        rows = busy.execute(text, args).fetchall()
        answers.append(sorted(rows) if name in UNORDERED else rows)
    if not changing:
        assert all(a == answers[0] for a in answers), answers
