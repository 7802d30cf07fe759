-- slidewin.ingest_batches: the exactly-once marker of each committed micro-batch.
-- The sink writes raw rows, rollups (via triggers) and this row in one transaction; a batch whose
-- (query_id, batch_id) is already here is skipped, so a replay after a crash changes nothing.
CREATE TABLE IF NOT EXISTS slidewin.ingest_batches (
    query_id     text   NOT NULL,
    batch_id     bigint NOT NULL CHECK (batch_id >= 0),
    rows_in      bigint NOT NULL DEFAULT 0 CHECK (rows_in >= 0),
    accepted     bigint NOT NULL DEFAULT 0 CHECK (accepted >= 0),
    duplicates   bigint NOT NULL DEFAULT 0 CHECK (duplicates >= 0),
    rejected     bigint NOT NULL DEFAULT 0 CHECK (rejected >= 0),
    max_ts       timestamptz,
    committed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (query_id, batch_id)
);
-- how long the batch's transaction ran before its commit, and how much of it went to session
-- windows (slidewin.session_cost reads them to say when sessions cost more than the stream
-- can afford); NULL for batches of stores made before they were kept
ALTER TABLE slidewin.ingest_batches ADD COLUMN IF NOT EXISTS seconds double precision;
ALTER TABLE slidewin.ingest_batches ADD COLUMN IF NOT EXISTS session_seconds double precision;
