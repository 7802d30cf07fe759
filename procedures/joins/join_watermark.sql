-- slidewin.join_watermark(join, now): the join's watermark as its inputs stand -- W = the least
-- stream time (newest event time committed) of the inputs holding it back, minus grace. NULL
-- while an input has never had data: a stream with no stream time yet holds W back whatever
-- idle is and however long ago the join was defined, so that W never passes records the join has
-- not seen (a backlog loaded after the other stream's, a stream started late) -- W waits for both
-- streams' first batch (slidewin.join_status says which it waits for; a self-join's one stream). Idleness is for inputs
-- that once had data: such an input holds W back while it had a batch within idle of now (idle
-- NULL, `never`: always); with neither holding it back, the newest of the two counts. The stored
-- watermark is never lowered: callers take the greatest of the two.
-- An asof join of a table (right_table): W = the left stream's watermark (no left record older
-- can still arrive: the ingest refuses it as late) - grace, NULL while either stream has never
-- had data. The table does not hold W back, however seldom it changes: a version arriving behind
-- W is late for the join instead (slidewin.joins_on_insert), so no answer W passed can change.
CREATE OR REPLACE FUNCTION slidewin.join_watermark(p_join slidewin.joins, p_now timestamptz)
RETURNS timestamptz
LANGUAGE sql STABLE
AS $$
    WITH inputs AS (
        SELECT s.newest_ts,
               p_join.idle IS NULL OR s.updated_at >= p_now - p_join.idle AS active
          FROM slidewin.stream_state s
         WHERE s.stream IN (p_join.left_stream, p_join.right_stream) AND s.newest_ts IS NOT NULL
    )
    SELECT CASE WHEN count(*) < CASE WHEN p_join.left_stream = p_join.right_stream THEN 1
                                     ELSE 2 END THEN NULL
                WHEN p_join.kind = 'asof'
                THEN (SELECT s.watermark FROM slidewin.stream_state s
                       WHERE s.stream = p_join.left_stream) - p_join.grace
                ELSE coalesce(min(newest_ts) FILTER (WHERE active), max(newest_ts))
                     - p_join.grace END
      FROM inputs
$$;
