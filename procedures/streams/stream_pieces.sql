-- slidewin.stream_pieces(stream, measure, cuts): one measure of a stream between the smallest and
-- the largest of p_cuts (whole seconds, any order, repeats allowed), in pieces no cut falls
-- strictly inside, with the columns of slidewin.stream_buckets: each piece a bucket of one of the
-- stream's grains (slidewin.stream_grains: 1 s and 1 min; the built-in events' 1 s, 10 s, 1 min,
-- 1 h), the coarsest whose bucket holds no cut -- so a window series whose every start, end and
-- block boundary is a cut can add, subtract and compare pieces whole, and a range between two
-- cuts is its summary (slidewin.stream_summary).
--
-- A bucket of grain G is "cut" when some cut lies strictly inside it; the pieces are the buckets
-- of each grain that are not cut while their parent bucket (of the next grain) is, and the
-- buckets of the coarsest grain that are not cut. So the rows read are those of the cut buckets'
-- children, never the whole range at a fine grain: a week between two cuts costs its hours (its
-- minutes for a declared stream), and the pieces number at most the children of each cut's
-- buckets plus one per coarsest bucket of the range (slidewin.window_work).
-- The children of a grain's cut buckets are read one index range per cut bucket, or -- when the
-- cut buckets cover most of the range -- one index range over all of it keeping those below a
-- cut bucket.
CREATE OR REPLACE FUNCTION slidewin.stream_pieces(
    p_stream text, p_measure text, p_cuts timestamptz[])
RETURNS TABLE (bucket timestamptz, n bigint, cnt bigint, total numeric, vmin numeric,
               vmax numeric, fmin double precision, fmax double precision, nan bigint,
               pinf bigint, ninf bigint)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_custom_plan  -- plan with the actual cuts and range, every call
AS $$
DECLARE
    v_grains integer[] := slidewin.stream_grains(p_stream);
    v_cols   text := slidewin.stream_bucket_columns(p_stream, p_measure, NULL);
    v_lo     timestamptz;
    v_hi     timestamptz;
    v_g      integer[];  -- the cut buckets: grain, start
    v_b      timestamptz[];
    v_parts  text[] := '{}'::text[];
    v_fine   integer;
    v_up     integer;
    v_not    text;
BEGIN
    SELECT min(c.t), max(c.t) INTO v_lo, v_hi FROM unnest(p_cuts) AS c(t);
    IF v_lo IS NULL OR v_lo >= v_hi THEN
        RETURN;
    END IF;
    SELECT array_agg(d.g), array_agg(d.b) INTO v_g, v_b
      FROM (SELECT DISTINCT f.g, f.b
              FROM (SELECT g.g, c.t, CASE WHEN c.t >= 'epoch'  -- slidewin.grain_floor, inline
                                          THEN date_bin(make_interval(secs => g.g), c.t, 'epoch')
                                          ELSE slidewin.grain_floor(c.t, g.g) END AS b
                      FROM unnest(p_cuts) AS c(t) CROSS JOIN unnest(v_grains[2:]) AS g(g)) AS f
             WHERE f.b < f.t) AS d;
    FOR i IN 1 .. cardinality(v_grains) LOOP
        v_fine := v_grains[i];
        v_up := v_grains[i + 1];
        v_not := CASE WHEN i = 1 THEN '' ELSE format(
            ' AND NOT EXISTS (SELECT 1 FROM unnest($3, $4) AS y(g, b) WHERE y.g = %s '
            'AND y.b = r.sec)', v_fine) END;
        IF v_up IS NULL THEN  -- the coarsest grain: its buckets that are not cut
            v_parts := v_parts || (format('SELECT %s FROM %s AS r WHERE true', v_cols,
                slidewin.stream_rollups(p_stream, v_fine, 'r.sec >= $1 AND r.sec < $2')) || v_not);
        ELSIF (SELECT count(*) FILTER (WHERE g = v_up) FROM unnest(v_g) AS g) * v_up
              >= extract(epoch FROM v_hi - v_lo) / 2 THEN  -- dense: one range, filtered
            v_parts := v_parts || (format(
                'SELECT %s FROM %s AS r WHERE CASE WHEN r.sec >= ''epoch'' THEN date_bin(''%3$s s'', '
                'r.sec, ''epoch'') ELSE slidewin.grain_floor(r.sec, %3$s) END IN (SELECT y.b FROM '
                'unnest($3, $4) AS y(g, b) WHERE y.g = %3$s)', v_cols,
                slidewin.stream_rollups(p_stream, v_fine, 'r.sec >= $1 AND r.sec < $2'), v_up)
                || v_not);
        ELSE  -- one index range per cut bucket
            v_parts := v_parts || (format(
                'SELECT %s FROM unnest($3, $4) AS d(g, b) CROSS JOIN LATERAL %s AS r '
                'WHERE d.g = %s', v_cols, slidewin.stream_rollups(p_stream, v_fine, format(
                    'r.sec >= greatest(d.b, $1) AND r.sec < least(d.b + interval ''%s s'', $2)',
                    v_up)), v_up) || v_not);
        END IF;
    END LOOP;
    RETURN QUERY EXECUTE array_to_string(v_parts, ' UNION ALL ') USING v_lo, v_hi, v_g, v_b;
END
$$;
