-- 0002: one stream state per stream, not per ingest query. Version 1 kept a row per ingest
-- (query id), so two ingests of the one stream had two watermarks, and a window final by one
-- could still change through the other. The rows become one, `events`: the newest of their
-- event times, the largest grace, and as watermark the largest newest - grace -- the
-- watermark windows were already read against, so nothing final before is open again.
ALTER TABLE slidewin.stream_state ADD COLUMN IF NOT EXISTS grace interval;
ALTER TABLE slidewin.stream_state ADD COLUMN watermark timestamptz;
WITH old AS (DELETE FROM slidewin.stream_state RETURNING *)
INSERT INTO slidewin.stream_state (query_id, newest_ts, updated_at, grace, watermark)
SELECT 'events', max(newest_ts), max(updated_at), max(grace), max(newest_ts - grace)
  FROM old HAVING count(*) > 0;
ALTER TABLE slidewin.stream_state RENAME COLUMN query_id TO stream;
