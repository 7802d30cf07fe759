-- slidewin.stream_buckets(stream, measure, step, from, to): one measure of a declared stream's
-- rollups summed into buckets of `step` seconds (aligned to the epoch) over [from, to): rows n,
-- values cnt, the exact sum of the finite values, min, max (as numeric: a double's shortest
-- round-trip decimal, which casts back to the same double) and the NaN/+Inf/-Inf counts.
-- Reads the seconds asked for, never the table.
CREATE OR REPLACE FUNCTION slidewin.stream_buckets(
    p_stream text, p_measure text, p_step integer, p_from timestamptz, p_to timestamptz)
RETURNS TABLE (bucket timestamptz, n bigint, cnt bigint, total numeric, vmin numeric,
               vmax numeric, nan bigint, pinf bigint, ninf bigint)
LANGUAGE plpgsql STABLE
SET extra_float_digits = 1  -- a double's text is its shortest round-trip form
AS $$
DECLARE
    v_m    record := slidewin.stream_measure(p_stream, p_measure);
    v_cast text := CASE WHEN v_m.type = 'double precision' THEN '::text::numeric'
                        ELSE '::numeric' END;
    v_odd  text := CASE WHEN v_m.type = 'double precision'
                        THEN format('sum(%I)::bigint, sum(%I)::bigint, sum(%I)::bigint',
                                    v_m.measure || '_nan', v_m.measure || '_pinf',
                                    v_m.measure || '_ninf')
                        ELSE '0::bigint, 0::bigint, 0::bigint' END;
BEGIN
    RETURN QUERY EXECUTE format(
        'SELECT slidewin.grain_floor(sec, $1), sum(n)::bigint, sum(%1$I)::bigint, sum(%2$I), '
        'min(%3$I)%5$s, max(%4$I)%5$s, %6$s FROM slidewin_rollups.%7$I '
        'WHERE sec >= $2 AND sec < $3 GROUP BY 1 ORDER BY 1',
        v_m.measure || '_n', v_m.measure || '_sum', v_m.measure || '_min',
        v_m.measure || '_max', v_cast, v_odd, p_stream)
    USING p_step, p_from, p_to;
END
$$;
