-- slidewin.stream_pieces(stream, measure, cuts): one measure of a declared stream between the
-- smallest and the largest of p_cuts (whole seconds), in pieces no cut falls strictly inside,
-- with the columns of slidewin.stream_buckets: the minutes holding no cut from the minute grain,
-- the seconds of the minutes that hold one -- so a window series whose every start, end and
-- block boundary is a cut reads about 60 seconds per cut plus one row per minute of its span
-- (slidewin.rollup_pieces for the built-in stream, which has more grains).
CREATE OR REPLACE FUNCTION slidewin.stream_pieces(
    p_stream text, p_measure text, p_cuts timestamptz[])
RETURNS TABLE (bucket timestamptz, n bigint, cnt bigint, total numeric, vmin numeric,
               vmax numeric, fmin double precision, fmax double precision, nan bigint,
               pinf bigint, ninf bigint)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_custom_plan  -- plan with the actual cuts and range, every call
AS $$
DECLARE
    v_m    record := slidewin.stream_measure(p_stream, p_measure);
    v_dbl  boolean := v_m.type = 'double precision';
    v_cols text;
    v_lo   timestamptz;
    v_hi   timestamptz;
    v_d60  timestamptz[];
BEGIN
    SELECT min(c.t), max(c.t), array_agg(DISTINCT c.f) FILTER (WHERE c.f < c.t)
      INTO v_lo, v_hi, v_d60
      FROM (SELECT u.t, CASE WHEN u.t >= 'epoch' THEN date_bin('1 min', u.t, 'epoch')
                             ELSE slidewin.grain_floor(u.t, 60) END AS f
              FROM unnest(p_cuts) AS u(t)) AS c;
    IF v_lo IS NULL OR v_lo >= v_hi THEN
        RETURN;
    END IF;
    v_cols := format('r.sec, r.n, r.%I, r.%I, ', v_m.measure || '_n', v_m.measure || '_sum')
        || CASE WHEN v_dbl
                THEN format('NULL::numeric, NULL::numeric, r.%I, r.%I, r.%I, r.%I, r.%I',
                            v_m.measure || '_min', v_m.measure || '_max',
                            v_m.measure || '_nan', v_m.measure || '_pinf',
                            v_m.measure || '_ninf')
                ELSE format('r.%I::numeric, r.%I::numeric, NULL::float8, NULL::float8, '
                            '0::bigint, 0::bigint, 0::bigint',
                            v_m.measure || '_min', v_m.measure || '_max') END;
    RETURN QUERY EXECUTE format(
        -- the seconds of the minutes a cut falls inside, one index range each
        'SELECT %1$s FROM unnest($3) AS d(b) CROSS JOIN LATERAL ('
        '  SELECT * FROM slidewin_rollups.%2$I x WHERE x.sec >= greatest(d.b, $1) '
        '     AND x.sec < least(d.b + interval ''1 minute'', $2)) AS r '
        'UNION ALL '
        -- the other minutes, whole
        'SELECT %1$s FROM slidewin_rollups.%3$I r WHERE r.sec >= $1 AND r.sec < $2 '
        '   AND NOT EXISTS (SELECT 1 FROM unnest($3) AS x(b) WHERE x.b = r.sec)',
        v_cols, p_stream, p_stream || '#minute')
    USING v_lo, v_hi, v_d60;
END
$$;
