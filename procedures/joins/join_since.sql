-- slidewin.join_since(name, after_seq, limit): an interval join's results written after result
-- after_seq (0: from the first), in the order they were written, at most limit -- what
-- `slidewin joins show --follow` reads after each slidewin_joins signal. Reads the primary key.
CREATE OR REPLACE FUNCTION slidewin.join_since(p_name text, p_after bigint,
                                               p_limit integer DEFAULT 1000)
RETURNS TABLE (seq bigint, ts timestamptz, emitted_at timestamptz, l jsonb, r jsonb,
               final boolean)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_j   slidewin.joins := slidewin.join_get(p_name);
    v_cut timestamptz := (SELECT s.complete_up_to FROM slidewin.join_status(p_name) s);
BEGIN
    IF v_j.kind <> 'interval' THEN
        RAISE EXCEPTION 'join % is a % join: it keeps no results to follow', p_name, v_j.kind
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'read it with slidewin.join_show over a time range';
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT q.seq, q.ts, q.emitted_at, q.l, q.r, coalesce(q.ts < $4, false) FROM (%s) q '
        'WHERE q.seq > $3 ORDER BY q.seq LIMIT $5', v_j.show_sql)
      USING '-infinity'::timestamptz, 'infinity'::timestamptz, coalesce(p_after, 0), v_cut,
            p_limit;
END
$$;
