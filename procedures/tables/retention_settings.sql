-- slidewin.retention_settings: named retention policies (history and/or row target, chunk, yield).
-- A policy with neither limit would delete nothing -- or, as VoltDB does, everything: refused.
-- The chunk cap repeats slidewin.check_chunk's (a CHECK needs a literal; db/limits.py MAX_CHUNK).
CREATE TABLE IF NOT EXISTS slidewin.retention_settings (
    name       text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9_.-]{1,64}$'),
    history_s  double precision CHECK (history_s IS NULL OR history_s > 0),
    max_rows   bigint CHECK (max_rows IS NULL OR max_rows > 0),
    chunk      integer NOT NULL DEFAULT 100 CHECK (chunk BETWEEN 1 AND 1000000),
    yield_ms   integer NOT NULL DEFAULT 100 CHECK (yield_ms BETWEEN 0 AND 3600000),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT retention_needs_a_limit CHECK (history_s IS NOT NULL OR max_rows IS NOT NULL)
);
