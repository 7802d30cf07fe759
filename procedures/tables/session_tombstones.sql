-- slidewin.session_tombstones: the sessions a merge made disappear (Kafka's tombstones), with
-- the version of the statement that merged them and the session they went into. Read by
-- `--emit update`; deleted with their definition's retention by slidewin.sessions_expire.
CREATE TABLE IF NOT EXISTS slidewin.session_tombstones (
    def_id       integer     NOT NULL,  -- slidewin.session_defs (id), unchecked like session_store
    uuid         text        NOT NULL,
    start_ts     timestamptz NOT NULL,
    end_ts       timestamptz NOT NULL,
    version      bigint      NOT NULL,
    merged_start timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS session_tombstones_version
    ON slidewin.session_tombstones (def_id, version);
CREATE INDEX IF NOT EXISTS session_tombstones_end ON slidewin.session_tombstones (def_id, end_ts);
