-- slidewin.join_keep_from(stream): the oldest record time retention must keep in a stream because
-- an interval join reads it -- the least, over those joins, of W - after for a left side and
-- W - before for a right side (both for a self-join): a record W has not passed that far may
-- still pair, or its outer row is not final yet. '-infinity' (keep everything) while a join's W
-- is unset; NULL when no interval join reads the stream. slidewin.stream_nibble (declared
-- streams) and slidewin.nibble (events) delete nothing at or after it.
CREATE OR REPLACE FUNCTION slidewin.join_keep_from(p_stream text)
RETURNS timestamptz
LANGUAGE sql STABLE
AS $$
    SELECT min(coalesce(j.watermark, '-infinity')
               - CASE WHEN j.left_stream = j.right_stream THEN greatest(j.after, j.before)
                      WHEN j.left_stream = p_stream THEN j.after
                      ELSE j.before END)
      FROM slidewin.joins j
     WHERE j.kind = 'interval' AND p_stream IN (j.left_stream, j.right_stream)
$$;
