-- slidewin.schema_version: one row per applied schema version (baseline = 1, then migrations/NNNN_*.sql).
CREATE TABLE IF NOT EXISTS slidewin.schema_version (
    version    integer PRIMARY KEY CHECK (version >= 1),
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
