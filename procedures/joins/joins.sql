-- slidewin.joins: the registry of joins between two streams (the built-in `events` or declared
-- ones; a stream may be both sides). Definitions are data, like
-- the streams and windows; slidewin.join_define writes a row, slidewin.join_drop removes it.
--
-- kind:
--   interval  l.on = r.on AND r.time BETWEEN l.time - before AND l.time + after (inner, left,
--             right or full), maintained by the ingest in each batch's own transaction: results in
--             slidewin_joins.<name>, records late for the join in slidewin_joins."<name>#late";
--   rows      Samza's tuple window: each left record with the right records among the n newest
--             of the right stream at or before its time whose on-column matches (read time);
--   asof      each left record with the right stream's newest row for its key at or before its
--             time, and no older than its time - within (NULL: any age): the version of that
--             "table" valid then (read time). right_table: the right stream is a table
--             (slidewin.streams.is_table) -- its versions are kept forever, so the join keeps W
--             too (the left stream's watermark - grace, slidewin.join_watermark), an answer is
--             final once W passed its left record, and a right version arriving behind W is late
--             for the join (recorded in slidewin_joins."<name>#late", left out): looked up by the
--             left record's time, no other version can change an answer W passed.
-- watermark: W = min(stream time of the inputs holding it back) - grace, never lowered; NULL
-- while an input has never had data; an input silent for longer than idle (wall clock) after it
-- had data does not hold it back (slidewin.join_watermark).
-- pair_*_sql / late_*_sql / final_*_sql: the statements the trigger and slidewin.join_advance run,
-- generated once by slidewin.join_sql from the definition.
CREATE SCHEMA IF NOT EXISTS slidewin_joins;
CREATE TABLE IF NOT EXISTS slidewin.joins (
    name           text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_]{0,47}$'),
    kind           text NOT NULL DEFAULT 'interval' CHECK (kind IN ('interval', 'rows', 'asof')),
    join_type      text NOT NULL DEFAULT 'inner'
                   CHECK (join_type IN ('inner', 'left', 'right', 'full')),
    left_stream    text NOT NULL REFERENCES slidewin.streams (name),
    right_stream   text NOT NULL REFERENCES slidewin.streams (name),
    left_on        text NOT NULL,
    right_on       text NOT NULL,
    before         interval NOT NULL DEFAULT interval '0' CHECK (before >= interval '0'),
    after          interval NOT NULL DEFAULT interval '0' CHECK (after >= interval '0'),
    grace          interval NOT NULL DEFAULT interval '0' CHECK (grace >= interval '0'),
    idle           interval CHECK (idle > interval '0'),
    n_rows         integer CHECK (n_rows BETWEEN 1 AND 100000),
    select_left    text[] NOT NULL,
    select_right   text[] NOT NULL,
    watermark      timestamptz,
    late_left      bigint NOT NULL DEFAULT 0,
    late_right     bigint NOT NULL DEFAULT 0,
    pairs          bigint NOT NULL DEFAULT 0,
    left_only      bigint NOT NULL DEFAULT 0,
    right_only     bigint NOT NULL DEFAULT 0,
    pair_left_sql  text,
    pair_right_sql text,
    late_left_sql  text,
    late_right_sql text,
    final_left_sql text,
    final_right_sql text,
    show_sql       text,
    created_at     timestamptz NOT NULL DEFAULT now()
);
-- a stream may be joined with itself (left_stream = right_stream): a store made when that was
-- refused loses the CHECK here (its generated name; gone already: nothing to do)
ALTER TABLE slidewin.joins DROP CONSTRAINT IF EXISTS joins_check;
CREATE INDEX IF NOT EXISTS joins_left_stream ON slidewin.joins (left_stream);
CREATE INDEX IF NOT EXISTS joins_right_stream ON slidewin.joins (right_stream);
-- an as-of join's bound on a version's age, and whether its right stream is a table: a join made
-- before either existed has neither (unbounded, not a table), as it was
ALTER TABLE slidewin.joins ADD COLUMN IF NOT EXISTS within interval
    CONSTRAINT joins_within_check CHECK (within >= interval '0');
ALTER TABLE slidewin.joins ADD COLUMN IF NOT EXISTS right_table boolean NOT NULL DEFAULT false;
