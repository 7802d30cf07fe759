-- slidewin.join_watermark(join, now): the join's watermark as its inputs stand -- W = the least
-- stream time (newest event time committed) of the inputs holding it back, minus grace. An input
-- holds W back when it has data and had a batch within idle of now (idle NULL: always); with
-- neither holding it back, the newest of the two counts. An input that never had data does not
-- hold W back -- once idle has passed since the join was defined: until then W waits for it, so
-- that two streams started together on their backlogs are joined whichever commits first. NULL
-- while W cannot move. The stored watermark is never lowered: callers take the greatest of the
-- two.
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
    SELECT CASE WHEN count(*) < 2 AND p_join.idle IS NOT NULL
                     AND p_join.created_at > p_now - p_join.idle THEN NULL
                ELSE coalesce(min(newest_ts) FILTER (WHERE active), max(newest_ts))
                     - p_join.grace END
      FROM inputs
$$;
