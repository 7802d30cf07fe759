-- slidewin.stream_hopping_series(stream, measure, size, advance, first, last, key, empty): the
-- windows [s, s + size) of one measure of a stream for s = first, first + advance, ... <= last
-- (seconds; the caller checks and aligns them), in one pass over the buckets: the work grows with
-- buckets + windows, never with windows x size. Columns: the window's start, rows n, values cnt,
-- total (what sum() over the raw values gives, NULL without values), min, max (numeric), avg.
-- Windows without rows only when p_empty. Without p_key the buckets are slidewin.stream_pieces
-- (cut at every start, end and multiple of the size); with it, that key's rows per
-- gcd(size, advance) seconds (slidewin.stream_buckets).
--
-- Every window has the same length L = size. Next to the buckets go two marker rows per window,
-- at its start s and at its end s + L (no value: min, max and sum skip them). Sorted by time,
-- markers before buckets at the same time:
--   * running sums (rows, values, the exact sum of the finite values, the NaN/+Inf/-Inf counts)
--     give, at each marker, those before it; a window's are its end marker's minus its start
--     marker's (exact: integers and numeric);
--   * time is cut into blocks of length L aligned to the epoch, so a window is the tail of one
--     block (from s) and the head of the next (before s + L) -- van Herk / Gil-Werman: the
--     running min and max of each block backwards give the tail's at the start marker, forwards
--     the head's at the end marker.
-- Then each window joins its two markers: a few sorts of buckets + 2 x windows rows, no loop.
-- When the advance divides the size and a bucket lies in at most 16 windows (60 s every 10 s:
-- 6), adding each bucket of the advance to its windows costs less than the markers' sorts and
-- is still at most 16 x the buckets: that is done instead.
CREATE OR REPLACE FUNCTION slidewin.stream_hopping_series(
    p_stream text, p_measure text, p_size integer, p_advance integer, p_first timestamptz,
    p_last timestamptz, p_key text DEFAULT NULL, p_empty boolean DEFAULT false)
RETURNS TABLE (window_start timestamptz, n bigint, cnt bigint, total numeric, vmin numeric,
               vmax numeric, avg double precision)
LANGUAGE plpgsql STABLE
SET extra_float_digits = 1  -- a double's min and max as its shortest round-trip decimal
SET max_parallel_workers_per_gather = 0
SET jit = off
SET work_mem = '64MB'  -- the sorts of up to 100,000 windows' markers stay in memory
AS $$
DECLARE
    v_m     record := slidewin.stream_measure(p_stream, p_measure);
    v_dbl   boolean := v_m.type = 'double precision';
    v_span  interval := make_interval(secs => p_size);
    v_adv   interval := make_interval(secs => p_advance);
    v_end   timestamptz := p_last + v_span;
    v_count bigint := (extract(epoch FROM p_last - p_first) / p_advance)::bigint + 1;
    v_cuts  timestamptz[];
    v_lo    text := CASE WHEN v_dbl THEN 'fmin' ELSE 'vmin' END;
    v_hi    text := CASE WHEN v_dbl THEN 'fmax' ELSE 'vmax' END;
    v_odd   text := CASE WHEN v_dbl
                         THEN 'sum(y.nan) OVER run AS pnan, sum(y.pinf) OVER run AS ppinf, '
                              'sum(y.ninf) OVER run AS pninf'
                         ELSE '0 AS pnan, 0 AS ppinf, 0 AS pninf' END;
    v_num   text := CASE WHEN v_dbl THEN '::text::numeric' ELSE '' END;
    v_src   text;
BEGIN
    IF p_first IS NULL OR p_last IS NULL OR p_first > p_last THEN
        RETURN;
    END IF;
    IF p_size % p_advance = 0 AND p_size / p_advance <= 16 THEN
        -- a bucket of the advance lies in at most 16 windows: add each to its windows
        RETURN QUERY
        WITH w AS (
            SELECT s.ws, sum(b.n)::bigint AS n, sum(b.cnt)::bigint AS cnt,
                   CASE WHEN sum(b.cnt) > 0 THEN slidewin.stream_total(
                       sum(b.total), sum(b.nan)::bigint, sum(b.pinf)::bigint,
                       sum(b.ninf)::bigint) END AS total,
                   coalesce(min(b.vmin), (min(b.fmin))::text::numeric) AS vmin,
                   coalesce(max(b.vmax), (max(b.fmax))::text::numeric) AS vmax
              FROM slidewin.stream_buckets(p_stream, p_measure, p_advance, p_first, v_end,
                                           p_key) AS b
             CROSS JOIN LATERAL generate_series(b.bucket - v_span + v_adv, b.bucket, v_adv)
                   AS s(ws)
             WHERE s.ws >= p_first AND s.ws <= p_last
             GROUP BY s.ws
        )
        SELECT s.ws, coalesce(w.n, 0), coalesce(w.cnt, 0), w.total, w.vmin, w.vmax,
               (w.total / nullif(w.cnt, 0))::double precision
          FROM generate_series(0, v_count - 1) AS k(k)
         CROSS JOIN LATERAL (SELECT p_first + k.k * v_adv AS ws) AS s
          LEFT JOIN w ON w.ws = s.ws
         WHERE p_empty OR w.ws IS NOT NULL;
        RETURN;
    END IF;
    IF p_key IS NULL THEN
        v_cuts := ARRAY(SELECT generate_series(p_first, p_last, v_adv)
                        UNION ALL SELECT generate_series(p_first + v_span, v_end, v_adv)
                        UNION ALL SELECT generate_series(
                                      slidewin.grain_floor(p_first, p_size) + v_span,
                                      v_end, v_span));
        v_src := 'slidewin.stream_pieces($1, $2, $3)';
    ELSE
        v_src := 'slidewin.stream_buckets($1, $2, gcd($7, $8), $4, $5, $6)';
    END IF;
    RETURN QUERY EXECUTE format(
    'WITH x AS (
        SELECT b.bucket AS t, 1 AS ord, NULL::timestamptz AS ws, false AS is_end, b.n, b.cnt,
               b.total, b.nan, b.pinf, b.ninf, b.%1$I AS lo, b.%2$I AS hi
          FROM %3$s AS b
        UNION ALL
        SELECT $4 + s.k * $9, 0, $4 + s.k * $9, false, NULL, NULL, NULL, NULL, NULL, NULL,
               NULL, NULL
          FROM generate_series(0, $10 - 1) AS s(k)
        UNION ALL
        SELECT $4 + s.k * $9 + $11, 0, $4 + s.k * $9, true, NULL, NULL, NULL, NULL, NULL, NULL,
               NULL, NULL
          FROM generate_series(0, $10 - 1) AS s(k)
    ), y AS (
        SELECT x.*, floor(date_part(''epoch'', x.t) / $7)::bigint AS blk FROM x
    ), z AS (
        SELECT y.ws, y.is_end, sum(y.n) OVER run AS pn, sum(y.cnt) OVER run AS pcnt,
               sum(y.total) OVER run AS ptotal, %4$s,
               min(y.lo) OVER head AS hmin, max(y.hi) OVER head AS hmax,
               min(y.lo) OVER tail AS tmin, max(y.hi) OVER tail AS tmax
          FROM y
        WINDOW run AS (ORDER BY y.blk, y.t, y.ord ROWS UNBOUNDED PRECEDING),
               head AS (PARTITION BY y.blk ORDER BY y.t, y.ord ROWS UNBOUNDED PRECEDING),
               tail AS (PARTITION BY y.blk ORDER BY y.t DESC, y.ord DESC ROWS UNBOUNDED PRECEDING)
    ), m AS (
        SELECT * FROM z WHERE z.ws IS NOT NULL
    ), w AS (
        SELECT s.ws, (coalesce(e.pn, 0) - coalesce(s.pn, 0))::bigint AS n,
               (coalesce(e.pcnt, 0) - coalesce(s.pcnt, 0))::bigint AS cnt,
               coalesce(e.ptotal, 0) - coalesce(s.ptotal, 0) AS total,
               (coalesce(e.pnan, 0) - coalesce(s.pnan, 0))::bigint AS nan,
               (coalesce(e.ppinf, 0) - coalesce(s.ppinf, 0))::bigint AS pinf,
               (coalesce(e.pninf, 0) - coalesce(s.pninf, 0))::bigint AS ninf,
               least(s.tmin, e.hmin) AS lo, greatest(s.tmax, e.hmax) AS hi
          FROM m AS s JOIN m AS e ON e.ws = s.ws AND e.is_end
         WHERE NOT s.is_end
    )
    SELECT w.ws, w.n, w.cnt,
           CASE WHEN w.cnt > 0 THEN slidewin.stream_total(w.total, w.nan, w.pinf, w.ninf) END,
           w.lo%5$s, w.hi%5$s,
           (slidewin.stream_total(w.total, w.nan, w.pinf, w.ninf)
            / nullif(w.cnt, 0))::double precision
      FROM w
     WHERE $12 OR w.n > 0',
        v_lo, v_hi, v_src, v_odd, v_num)
    USING p_stream, p_measure, v_cuts, p_first, v_end, p_key, p_size, p_advance, v_adv,
          v_count, v_span, p_empty;
END
$$;
