-- slidewin.session_cost(p_batches): what session windows cost the ingest lately -- over the
-- newest p_batches committed batches that recorded their times (one index range of
-- ingest_batches_committed_at): how many, their seconds in all, and the seconds spent keeping
-- session windows. A share near one means the ingest spends its time on sessions: typically a
-- definition over keys that never recur, where every event is a session of its own.
CREATE OR REPLACE FUNCTION slidewin.session_cost(p_batches integer DEFAULT 100)
RETURNS TABLE (batches bigint, batch_seconds double precision, session_seconds double precision)
LANGUAGE sql STABLE
AS $$
    SELECT count(*), coalesce(sum(b.seconds), 0), coalesce(sum(b.session_seconds), 0)
      FROM (SELECT i.seconds, i.session_seconds FROM slidewin.ingest_batches i
             WHERE i.seconds IS NOT NULL
             ORDER BY i.committed_at DESC LIMIT greatest(p_batches, 1)) AS b
$$;
