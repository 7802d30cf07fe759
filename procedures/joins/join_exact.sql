-- slidewin.join_exact(name, from, to): the exact answer of an interval join -- one SQL join of
-- the two streams' stored records with times in [from, to) (of a self-join: the stream's with
-- itself, each record with itself too), records late for the join left out,
-- each result as both sides' (time, key) (NULL for the missing side). Once W has passed every
-- record, the join's results over the same records equal it; tests and `slidewin bench joins`
-- check exactly that. Its cost grows with the range: a check, not a query to poll.
CREATE OR REPLACE FUNCTION slidewin.join_exact(p_name text, p_from timestamptz,
                                               p_to timestamptz)
RETURNS TABLE (l_ts timestamptz, l_key text, r_ts timestamptz, r_key text)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_j slidewin.joins := slidewin.join_get(p_name);
    v_l slidewin.streams := slidewin.stream_row(v_j.left_stream);
    v_r slidewin.streams := slidewin.stream_row(v_j.right_stream);
BEGIN
    IF v_j.kind <> 'interval' THEN
        RAISE EXCEPTION 'join % is a % join: it is read from the streams already', p_name,
                        v_j.kind USING ERRCODE = 'invalid_parameter_value',
                        HINT = 'use slidewin.join_show';
    END IF;
    RETURN QUERY EXECUTE format(
        'WITH l AS (SELECT * FROM %1$s l WHERE %11$sl.%2$I >= $1 AND l.%2$I < $2 '
        '  AND NOT EXISTS (SELECT 1 FROM slidewin_joins.%9$I x WHERE x.side = ''l'' '
        '  AND x.ts = l.%2$I AND x.key = l.%3$I::text)), '
        'r AS (SELECT * FROM %4$s r WHERE %12$sr.%5$I >= $1 AND r.%5$I < $2 '
        '  AND NOT EXISTS (SELECT 1 FROM slidewin_joins.%9$I x WHERE x.side = ''r'' '
        '  AND x.ts = r.%5$I AND x.key = r.%6$I::text)) '
        'SELECT l.%2$I, l.%3$I::text, r.%5$I, r.%6$I::text FROM l %10$s JOIN r '
        'ON r.%8$I = l.%7$I AND r.%5$I BETWEEN l.%2$I - $3 AND l.%2$I + $4',
        slidewin.stream_table(v_l.name), v_l.time_column, v_l.key_column,
        slidewin.stream_table(v_r.name), v_r.time_column, v_r.key_column,
        v_j.left_on, v_j.right_on, v_j.name || '#late', upper(v_j.join_type),
        slidewin.stream_time_prefix(v_l.name, 'l'), slidewin.stream_time_prefix(v_r.name, 'r'))
      USING p_from, p_to, v_j.before, v_j.after;
END
$$;
