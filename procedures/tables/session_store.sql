-- slidewin.session_store: one row per session window of a key under a definition (Kafka's KIP-94):
-- [start_ts, end_ts] are the session's first and last event times; n, total, vmin, vmax its
-- aggregates. Sessions of one key and definition never overlap and lie more than the gap apart.
-- Written only by slidewin.sessions_on_insert (and deleted by slidewin.sessions_expire); not
-- changed by deletes of raw rows: a session is a stream aggregate with its own retention.
CREATE TABLE IF NOT EXISTS slidewin.session_store (
    def_id   integer     NOT NULL,  -- no foreign key: its check per row costs the ingest
    uuid     text        NOT NULL,
    start_ts timestamptz NOT NULL,
    end_ts   timestamptz NOT NULL CHECK (end_ts >= start_ts),
    n        bigint      NOT NULL CHECK (n > 0),
    total    numeric     NOT NULL,
    vmin     bigint      NOT NULL,
    vmax     bigint      NOT NULL,
    version  bigint      NOT NULL,
    PRIMARY KEY (def_id, uuid, start_ts)
);
-- the sessions a new event may join: those of its key ending at most a gap before it
CREATE INDEX IF NOT EXISTS session_store_key_end ON slidewin.session_store (def_id, uuid, end_ts);
-- expiry and `--emit final`: sessions in end order
CREATE INDEX IF NOT EXISTS session_store_end ON slidewin.session_store (def_id, end_ts);
-- `--emit update`: the sessions changed since a version
CREATE INDEX IF NOT EXISTS session_store_version ON slidewin.session_store (def_id, version);
-- a definition that counts events only (no measure, slidewin.session_defs) keeps no sum, min or max
ALTER TABLE slidewin.session_store ALTER COLUMN total DROP NOT NULL;
ALTER TABLE slidewin.session_store ALTER COLUMN vmin DROP NOT NULL;
ALTER TABLE slidewin.session_store ALTER COLUMN vmax DROP NOT NULL;
