-- slidewin.stream_state: one row per ingest stream (query_id) holding the newest event time it
-- has committed. The ingest sink reads it (FOR UPDATE) at the start of each batch transaction to
-- classify events as `late` (older than newest - grace) or `expired` (older than newest -
-- history), and raises it in the same transaction -- so the classification of a batch is fixed by
-- what was committed before it, and a replayed batch sees the same value. Reading one row here
-- avoids scanning slidewin.ingest_batches for max(max_ts), which grows with every batch.
CREATE TABLE IF NOT EXISTS slidewin.stream_state (
    query_id   text PRIMARY KEY CHECK (length(query_id) BETWEEN 1 AND 200),
    newest_ts  timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now()
);
-- the ingest's grace, recorded with each batch: newest_ts - grace is the windows' watermark
ALTER TABLE slidewin.stream_state ADD COLUMN IF NOT EXISTS grace interval;
