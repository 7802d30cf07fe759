-- slidewin.join_show(name, from, to, limit): a join's answers with ts in [from, to), newest first,
-- at most limit (NULL: all) -- for an interval join its stored results, for a rows or asof join the
-- answers read from the streams now. l and r are the two records' kept columns as jsonb (NULL on
-- the missing side of an outer row); final: ts is before complete_up_to (slidewin.join_status),
-- so the answer will not change. Reads the ts index (interval) or the left stream's time index:
-- the cost follows the answers returned.
CREATE OR REPLACE FUNCTION slidewin.join_show(p_name text, p_from timestamptz,
                                              p_to timestamptz, p_limit integer DEFAULT 100)
RETURNS TABLE (seq bigint, ts timestamptz, emitted_at timestamptz, l jsonb, r jsonb,
               final boolean)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_j   slidewin.joins := slidewin.join_get(p_name);
    v_cut timestamptz := (SELECT s.complete_up_to FROM slidewin.join_status(p_name) s);
BEGIN
    IF p_from IS NULL OR p_to IS NULL OR p_limit < 0 THEN
        RAISE EXCEPTION 'from and to are required and limit is 0 or more (got %, %, %)',
                        p_from, p_to, p_limit USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT q.seq, q.ts, q.emitted_at, q.l, q.r, coalesce(q.ts < $4, false) FROM (%s) q '
        'ORDER BY q.ts DESC, q.seq DESC NULLS LAST LIMIT $3', v_j.show_sql)
      USING p_from, p_to, p_limit, v_cut;
END
$$;
