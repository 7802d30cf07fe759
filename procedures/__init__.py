"""The store's SQL: DDL and PL/pgSQL, one object per ``.sql`` file, shipped as package data.

``BASELINE`` is the order ``slidewin db init`` applies them in. Every baseline file is idempotent
(``IF NOT EXISTS`` / ``OR REPLACE``), so init both creates and refreshes; schema changes that are
not idempotent go in ``migrations/NNNN_name.sql`` and run once each, recorded in
``slidewin.schema_version``.
"""

from __future__ import annotations

from importlib import resources

BASELINE: tuple[str, ...] = (
    "schema.sql",
    "tables/schema_version.sql",
    "tables/config.sql",
    "tables/events.sql",
    "tables/rollups.sql",
    "functions/rollup_grains.sql",
    "functions/grain_floor.sql",
    "tables/rollups_coarse.sql",
    "tables/dead_letters.sql",
    "tables/ingest_batches.sql",
    "tables/retention_settings.sql",
    "tables/retention_state.sql",
    "tables/session_defs.sql",
    "tables/session_store.sql",
    "tables/session_tombstones.sql",
    "functions/partition_of.sql",
    "functions/partition_of_current.sql",
    "functions/partition_keys.sql",
    "functions/partition_name.sql",
    "functions/check_partition.sql",
    "functions/check_chunk.sql",
    "functions/check_duration.sql",
    "functions/retention_settings_check.sql",
    "functions/check_window.sql",
    "functions/check_cutoff.sql",
    "functions/check_target_rows.sql",
    "functions/rollups_coarse_add.sql",
    "functions/rollups_coarse_subtract.sql",
    "functions/rollups_add.sql",
    "functions/rollups_subtract.sql",
    "triggers/rollups_on_insert.sql",
    "triggers/rollups_on_delete.sql",
    "triggers/rollups_on_update.sql",
    "triggers/rollups_on_truncate.sql",
    "functions/attach_rollup_triggers.sql",
    "triggers/events_rollup_triggers.sql",
    "functions/epoch_us_array.sql",
    "functions/session_begin.sql",
    "functions/sessions_apply.sql",
    "functions/session_late_detail.sql",
    "functions/sessions_late.sql",
    "triggers/sessions_on_insert.sql",
    "functions/attach_session_trigger.sql",
    "triggers/events_session_trigger.sql",
    "functions/ensure_partitions.sql",
    "functions/nibble.sql",
    "functions/delete_after_date.sql",
    "functions/delete_oldest_to_target.sql",
    "functions/delete_to_limits.sql",
    "functions/insert_event.sql",
    "functions/insert_and_delete_after_date.sql",
    "functions/insert_and_delete_oldest_to_target.sql",
    "functions/rollup_range.sql",
    "functions/window_summary.sql",
    "functions/window_avg.sql",
    "functions/window_max.sql",
    "functions/stream_time.sql",
    "views/minute_history.sql",
    "functions/refresh_minute_history.sql",
)


# Areas with SQL of their own; each folder's ``order.txt`` lists its files, one per line, in the
# order to apply them (after BASELINE). Every file there is idempotent too.
AREAS: tuple[str, ...] = (
    "ingest", "jobs", "client", "windows", "sessions", "keys", "streams", "joins", "metrics",
    "roles",
)


def area_files(area: str) -> list[str]:
    """The files of one area, in apply order (empty when the area has none)."""
    order = resources.files(__name__).joinpath(area, "order.txt")
    if not order.is_file():
        return []
    lines = order.read_text(encoding="utf-8").splitlines()
    return [f"{area}/{line.strip()}" for line in lines if line.strip() and not line.startswith("#")]


def all_files() -> list[str]:
    """BASELINE, then each area's files."""
    return [*BASELINE, *(name for area in AREAS for name in area_files(area))]


def read_sql(name: str) -> str:
    """Return the text of one packaged ``.sql`` file, e.g. ``functions/nibble.sql``."""
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


def migrations() -> list[tuple[int, str]]:
    """``(version, file name)`` of every migration, in version order (versions start at 2)."""
    folder = resources.files(__name__).joinpath("migrations")
    if not folder.is_dir():  # an install that shipped no migration need not ship the folder
        return []
    found = []
    for entry in folder.iterdir():
        stem = entry.name.removesuffix(".sql")
        if entry.name.endswith(".sql") and stem[:4].isdigit():
            found.append((int(stem[:4]), f"migrations/{entry.name}"))
    return sorted(found)
