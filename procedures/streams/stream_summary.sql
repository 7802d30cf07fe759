-- slidewin.stream_summary(stream, measure, from, to, key): one row over [from, to) of a
-- stream -- rows n, values cnt, total, min, max, avg, as slidewin.stream_hopping's columns; cnt 0
-- and NULLs (no data, never 0) when the range holds no value.
CREATE OR REPLACE FUNCTION slidewin.stream_summary(
    p_stream text, p_measure text, p_from timestamptz, p_to timestamptz,
    p_key text DEFAULT NULL)
RETURNS TABLE (n bigint, cnt bigint, total numeric, vmin numeric, vmax numeric,
               avg double precision)
LANGUAGE plpgsql STABLE  -- its plan kept: planned per call, it cost more than the answer
SET extra_float_digits = 1  -- a double's min and max as its shortest round-trip decimal
AS $$
BEGIN
    RETURN QUERY
    SELECT coalesce(sum(b.n), 0)::bigint, coalesce(sum(b.cnt), 0)::bigint,
           CASE WHEN sum(b.cnt) > 0 THEN slidewin.stream_total(
               sum(b.total), sum(b.nan)::bigint, sum(b.pinf)::bigint, sum(b.ninf)::bigint) END,
           coalesce(min(b.vmin), (min(b.fmin))::text::numeric),
           coalesce(max(b.vmax), (max(b.fmax))::text::numeric),
           (slidewin.stream_total(sum(b.total), sum(b.nan)::bigint, sum(b.pinf)::bigint,
                                  sum(b.ninf)::bigint) / nullif(sum(b.cnt), 0))::double precision
      FROM slidewin.stream_buckets(p_stream, p_measure, CASE WHEN p_key IS NULL THEN 0 ELSE 1 END,
                                   p_from, p_to, p_key) AS b;
END
$$;
