-- slidewin.session_defs: the registered session window definitions (window definitions are data,
-- kept apart from their processing, slidewin.sessions_on_insert).
--
-- gap, grace and retention follow Kafka's session windows (KIP-94) and window stores (KIP-428):
-- gap > 0, grace >= 0, retention >= gap + grace. stream_ts is the newest event time the
-- definition has seen; base_ts is its value before the transaction now writing (base_xid), the
-- stream time a batch is judged against: an event older than base_ts - grace is late for the
-- definition, whatever statements or chunks the batch is written in (slidewin.session_begin). version counts the statements that changed the definition's
-- sessions: every session or tombstone they write carries it, and a writer holds the row's lock
-- until it commits, so versions become visible in order (what `--follow --emit update` reads).
-- A removed definition keeps its row (dropped_at) until slidewin.sessions_expire has deleted its
-- sessions chunk by chunk.
CREATE TABLE IF NOT EXISTS slidewin.session_defs (
    id         integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text        NOT NULL CHECK (name ~ '^[a-z][a-z0-9_]{0,39}$'),
    gap        interval    NOT NULL CHECK (gap > interval '0'),
    grace      interval    NOT NULL CHECK (grace >= interval '0'),
    retention  interval    NOT NULL,
    stream_ts  timestamptz,
    base_ts    timestamptz,
    base_xid   xid8,
    version    bigint      NOT NULL DEFAULT 0,
    merges     bigint      NOT NULL DEFAULT 0 CHECK (merges >= 0),
    late       bigint      NOT NULL DEFAULT 0 CHECK (late >= 0),
    -- the longest session seen (kept here: finding it among the sessions would read them all)
    longest_key   text,
    longest_start timestamptz,
    longest_end   timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    dropped_at timestamptz,
    CHECK (retention >= gap + grace)
);
-- what keeping the sessions has cost so far: events merged and sessions created
-- (slidewin.sessions_apply), seconds spent by its writers (the insert trigger, the ingest sink)
-- -- a definition whose keys rarely recur makes about one session per event
ALTER TABLE slidewin.session_defs ADD COLUMN IF NOT EXISTS events bigint NOT NULL DEFAULT 0;
ALTER TABLE slidewin.session_defs ADD COLUMN IF NOT EXISTS created bigint NOT NULL DEFAULT 0;
ALTER TABLE slidewin.session_defs
    ADD COLUMN IF NOT EXISTS apply_seconds double precision NOT NULL DEFAULT 0;
-- a name is taken once among the definitions in force
CREATE UNIQUE INDEX IF NOT EXISTS session_defs_name ON slidewin.session_defs (name)
    WHERE dropped_at IS NULL;
-- the stream a definition keeps sessions of (slidewin.streams' name; `events` for every
-- definition made before streams could have sessions) and the measure it aggregates: a required
-- integer column of that stream (`val` for events), or NULL to count events only. A new column
-- comes with its default and loses it at once: the rows it finds are events' definitions.
ALTER TABLE slidewin.session_defs ADD COLUMN IF NOT EXISTS stream text NOT NULL DEFAULT 'events';
ALTER TABLE slidewin.session_defs ADD COLUMN IF NOT EXISTS measure text DEFAULT 'val';
ALTER TABLE slidewin.session_defs ALTER COLUMN measure DROP DEFAULT;
