-- slidewin.ingest_batches_committed_at: lets the client's reporter read the batches committed
-- since its last report (WHERE committed_at > $1) without scanning the whole bookkeeping table,
-- which gains a row per micro-batch for as long as ingest runs.
CREATE INDEX IF NOT EXISTS ingest_batches_committed_at ON slidewin.ingest_batches (committed_at);
