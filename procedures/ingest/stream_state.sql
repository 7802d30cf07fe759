-- slidewin.stream_state: one row per stream (today the one stream, `events`) holding the newest
-- event time any ingest has committed for it, the ingest's grace, and the watermark.
--
-- Every ingest of the stream -- the JSON/CSV and the Parquet query of one `slidewin ingest`, and
-- any other ingest writing the same stream from another landing directory -- locks this one row
-- at the start of each batch transaction (slidewin.stream_begin) and raises it in the same
-- transaction (slidewin.ingest_advance): batches of one stream take turns, each is classified
-- against what was committed before it, and a replayed batch sees the same values. Reading one
-- row avoids scanning slidewin.ingest_batches for max(max_ts), which grows with every batch.
--
-- watermark (slidewin.complete_up_to) never goes back: it is the greatest newest_ts - grace
-- recorded, and an ingest rejects as late anything older than it, whatever its own --grace. So a
-- window final once stays final, even when two ingests run with different graces.
CREATE TABLE IF NOT EXISTS slidewin.stream_state (
    stream     text PRIMARY KEY CHECK (length(stream) BETWEEN 1 AND 200),
    newest_ts  timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    grace      interval,
    watermark  timestamptz
);
