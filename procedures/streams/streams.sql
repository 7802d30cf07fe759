-- slidewin.streams: the registry of streams. `events` is the built-in stream (its own tables,
-- slidewin.events and slidewin.rollups); every other row is a stream a user declared with
-- slidewin.stream_define, whose rows live in slidewin_streams.<name> (hash-partitioned on its key
-- into slidewin_streams."<name>#<i>") and whose per-second rollups live in slidewin_rollups.<name>.
--
-- columns: the declared columns in order, [{"name": ..., "type": ..., "required": bool}], key and
-- time column included. measures: the numeric columns the rollups and windows aggregate.
-- insert_sql / recompute_sql (and minute_*: the same for the minute grain in
-- slidewin_rollups."<name>#minute"): the rollup statements the triggers run, generated from the
-- columns by slidewin.stream_rollup_sql whenever the stream is defined or altered.
-- retired_through: the newest event time retention has deleted (windows starting at or before it
-- are `partial`).
-- is_table: the stream is a table -- versioned rows by key (each row a version of its key, valid
-- from its time until the key's next one), kept with no retention at all: its history stays unset
-- (slidewin.stream_check_retention) and slidewin.stream_nibble deletes none of its rows. Set when
-- the stream is declared (slidewin.stream_define), never changed.
-- max_rows: the stream's row limit -- retention keeps its newest max_rows rows besides its
-- history (both hold when both are set; slidewin.stream_nibble). NULL: no row limit. Never on a
-- table (every version stays) nor on the built-in stream, whose row limit is its retention
-- policy's --max-rows (slidewin.retention_settings).
CREATE SCHEMA IF NOT EXISTS slidewin_streams;
CREATE SCHEMA IF NOT EXISTS slidewin_rollups;
CREATE TABLE IF NOT EXISTS slidewin.streams (
    name            text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_]{0,47}$'),
    key_column      text NOT NULL,
    time_column     text NOT NULL,
    columns         jsonb NOT NULL CHECK (jsonb_typeof(columns) = 'array'),
    measures        text[] NOT NULL DEFAULT '{}',
    keep_extra      boolean NOT NULL DEFAULT false,
    partitions      integer NOT NULL CHECK (partitions BETWEEN 1 AND 64),
    history         interval CHECK (history > interval '0'),
    grace           interval NOT NULL DEFAULT interval '0' CHECK (grace >= interval '0'),
    builtin         boolean NOT NULL DEFAULT false,
    insert_sql      text,
    recompute_sql   text,
    retired_through timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now()
);
INSERT INTO slidewin.streams (name, key_column, time_column, columns, measures, partitions, builtin)
VALUES ('events', 'uuid', 'ts',
        '[{"name": "uuid", "type": "text", "required": true},
          {"name": "val", "type": "bigint", "required": true},
          {"name": "ts", "type": "timestamptz", "required": true}]',
        '{val}', 8, true)
ON CONFLICT (name) DO NOTHING;
-- the minute grain of the rollups (slidewin_rollups."<name>#minute"), kept by the same triggers
ALTER TABLE slidewin.streams ADD COLUMN IF NOT EXISTS minute_insert_sql text;
ALTER TABLE slidewin.streams ADD COLUMN IF NOT EXISTS minute_recompute_sql text;
-- a table (is_table) keeps every version: never the built-in stream, never with a history
ALTER TABLE slidewin.streams ADD COLUMN IF NOT EXISTS is_table boolean NOT NULL DEFAULT false
    CONSTRAINT streams_table_kept CHECK (NOT (is_table AND (builtin OR history IS NOT NULL)));
-- a row limit (max_rows): a declared stream's own, never a table's nor the built-in stream's
ALTER TABLE slidewin.streams ADD COLUMN IF NOT EXISTS max_rows bigint
    CONSTRAINT streams_max_rows
        CHECK (max_rows IS NULL OR (max_rows > 0 AND NOT is_table AND NOT builtin));
