-- slidewin.rollup_pieces(p_cuts): the events between the smallest and the largest of p_cuts
-- (whole seconds, any order, repeats allowed), summed over all partitions into pieces that no
-- cut falls strictly inside: each piece is a bucket of one stored grain (1 s, 10 s, 1 min, 1 h),
-- the coarsest whose bucket holds no cut, so that a window series whose every start, end and
-- block boundary is a cut can add, subtract and compare pieces whole.
--
-- A bucket of grain G is "cut" when some cut lies strictly inside it; the pieces are the buckets
-- of each grain that are not cut while their parent bucket (of the next grain) is, and the hours
-- that are not cut. So the seconds read are those of the 10 s buckets holding a cut, never the
-- whole range: a week between two cuts costs its hours, and the pieces number at most about
-- 10 + 6 + 60 per cut plus one per hour of the range (slidewin.window_pieces_bound), and never
-- more than the range's buckets of the finest grain a cut needs.
CREATE OR REPLACE FUNCTION slidewin.rollup_pieces(p_cuts timestamptz[])
RETURNS TABLE (bucket timestamptz, n bigint, total numeric, vmin bigint, vmax bigint)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_lo   timestamptz;
    v_hi   timestamptz;
    v_d10  timestamptz[];
    v_d60  timestamptz[];
    v_d3600 timestamptz[];
    v_wide  double precision;
    v_dense10   boolean;
    v_dense60   boolean;
    v_dense3600 boolean;
BEGIN
    -- the buckets each cut falls strictly inside, per grain
    SELECT min(c.t), max(c.t),
           array_agg(DISTINCT c.f10) FILTER (WHERE c.f10 < c.t),
           array_agg(DISTINCT c.f60) FILTER (WHERE c.f60 < c.t),
           array_agg(DISTINCT c.f3600) FILTER (WHERE c.f3600 < c.t)
      INTO v_lo, v_hi, v_d10, v_d60, v_d3600
      FROM (SELECT u.t,  -- slidewin.grain_floor inline (a call per cut costs more than the rest)
                   CASE WHEN u.t >= 'epoch' THEN date_bin('10 s', u.t, 'epoch')
                        ELSE slidewin.grain_floor(u.t, 10) END AS f10,
                   CASE WHEN u.t >= 'epoch' THEN date_bin('1 min', u.t, 'epoch')
                        ELSE slidewin.grain_floor(u.t, 60) END AS f60,
                   CASE WHEN u.t >= 'epoch' THEN date_bin('1 hour', u.t, 'epoch')
                        ELSE slidewin.grain_floor(u.t, 3600) END AS f3600
              FROM unnest(p_cuts) AS u(t)) AS c;
    IF v_lo IS NULL OR v_lo >= v_hi THEN
        RETURN;
    END IF;
    -- The buckets of a grain below cut buckets: when the cut buckets cover most of the range,
    -- one index range over all of it, keeping the rows under a cut bucket; otherwise one index
    -- range per cut bucket (LATERAL: never the whole range tested against every cut bucket).
    v_wide := extract(epoch FROM v_hi - v_lo) / 2;
    v_dense10 := coalesce(cardinality(v_d10), 0) * 10 >= v_wide;
    v_dense60 := coalesce(cardinality(v_d60), 0) * 60 >= v_wide;
    v_dense3600 := coalesce(cardinality(v_d3600), 0) * 3600 >= v_wide;
    RETURN QUERY
    -- seconds of the 10 s buckets that are cut
    SELECT r.sec, r.n, r.total, r.vmin, r.vmax
      FROM unnest(v_d10) AS d(b)
     CROSS JOIN LATERAL (
           SELECT x.sec, sum(x.n)::bigint AS n, sum(x.total) AS total, min(x.vmin) AS vmin,
                  max(x.vmax) AS vmax
             FROM slidewin.rollups x
            WHERE x.sec >= greatest(d.b, v_lo) AND x.sec < least(d.b + interval '10 s', v_hi)
            GROUP BY x.sec) AS r
     WHERE NOT v_dense10
    UNION ALL
    SELECT x.sec, sum(x.n)::bigint, sum(x.total), min(x.vmin), max(x.vmax)
      FROM slidewin.rollups x
     WHERE v_dense10 AND x.sec >= v_lo AND x.sec < v_hi
       AND CASE WHEN x.sec >= 'epoch' THEN date_bin('10 s', x.sec, 'epoch')
                ELSE slidewin.grain_floor(x.sec, 10) END IN (SELECT unnest(v_d10))
     GROUP BY x.sec
    UNION ALL
    -- 10 s buckets not cut, of the minutes that are
    SELECT c.bucket, c.n, c.total, c.vmin, c.vmax
      FROM unnest(v_d60) AS d(b)
     CROSS JOIN LATERAL (
           SELECT x.bucket, sum(x.n)::bigint AS n, sum(x.total) AS total, min(x.vmin) AS vmin,
                  max(x.vmax) AS vmax
             FROM slidewin.rollups_coarse x
            WHERE x.grain = 10 AND x.bucket >= greatest(d.b, v_lo)
              AND x.bucket < least(d.b + interval '1 minute', v_hi)
            GROUP BY x.bucket) AS c
     WHERE NOT v_dense60 AND NOT EXISTS (SELECT 1 FROM unnest(v_d10) AS x(b) WHERE x.b = c.bucket)
    UNION ALL
    SELECT x.bucket, sum(x.n)::bigint, sum(x.total), min(x.vmin), max(x.vmax)
      FROM slidewin.rollups_coarse x
     WHERE v_dense60 AND x.grain = 10 AND x.bucket >= v_lo AND x.bucket < v_hi
       AND CASE WHEN x.bucket >= 'epoch' THEN date_bin('1 minute', x.bucket, 'epoch')
                ELSE slidewin.grain_floor(x.bucket, 60) END IN (SELECT unnest(v_d60))
       AND NOT EXISTS (SELECT 1 FROM unnest(v_d10) AS y(b) WHERE y.b = x.bucket)
     GROUP BY x.bucket
    UNION ALL
    -- minutes not cut, of the hours that are
    SELECT c.bucket, c.n, c.total, c.vmin, c.vmax
      FROM unnest(v_d3600) AS d(b)
     CROSS JOIN LATERAL (
           SELECT x.bucket, sum(x.n)::bigint AS n, sum(x.total) AS total, min(x.vmin) AS vmin,
                  max(x.vmax) AS vmax
             FROM slidewin.rollups_coarse x
            WHERE x.grain = 60 AND x.bucket >= greatest(d.b, v_lo)
              AND x.bucket < least(d.b + interval '1 hour', v_hi)
            GROUP BY x.bucket) AS c
     WHERE NOT v_dense3600
       AND NOT EXISTS (SELECT 1 FROM unnest(v_d60) AS x(b) WHERE x.b = c.bucket)
    UNION ALL
    SELECT x.bucket, sum(x.n)::bigint, sum(x.total), min(x.vmin), max(x.vmax)
      FROM slidewin.rollups_coarse x
     WHERE v_dense3600 AND x.grain = 60 AND x.bucket >= v_lo AND x.bucket < v_hi
       AND CASE WHEN x.bucket >= 'epoch' THEN date_bin('1 hour', x.bucket, 'epoch')
                ELSE slidewin.grain_floor(x.bucket, 3600) END IN (SELECT unnest(v_d3600))
       AND NOT EXISTS (SELECT 1 FROM unnest(v_d60) AS y(b) WHERE y.b = x.bucket)
     GROUP BY x.bucket
    UNION ALL
    -- hours not cut
    SELECT c.bucket, sum(c.n)::bigint, sum(c.total), min(c.vmin), max(c.vmax)
      FROM slidewin.rollups_coarse c
     WHERE c.grain = 3600 AND c.bucket >= v_lo AND c.bucket < v_hi
       AND NOT EXISTS (SELECT 1 FROM unnest(v_d3600) AS x(b) WHERE x.b = c.bucket)
     GROUP BY c.bucket;
END
$$;
