-- slidewin.hopping_series(p_key, p_size, p_advance, p_first, p_last, p_empty): count, sum, min
-- and max of every window [s, s + p_size) for s = p_first, p_first + p_advance, ... <= p_last
-- (seconds; the caller checks and aligns them), in one pass over the buckets: the work grows with
-- buckets + windows, never with windows x size. Windows without events only when p_empty.
-- Without p_key the buckets are slidewin.rollup_pieces (all events); with it, that key's events
-- summed per gcd(size, advance) seconds (slidewin.key_buckets).
--
-- Every window has the same length L = p_size. Next to the buckets go two marker rows per
-- window, at its start s and at its end s + L (no value: min, max and sum skip them). Sorted by
-- time, markers before buckets at the same time:
--   * a running count and sum give, at each marker, the events before it; a window's count and
--     sum are its end marker's minus its start marker's (exact: integers and numeric);
--   * time is cut into blocks of length L aligned to the epoch, so a window is the tail of one
--     block (from s) and the head of the next (before s + L) -- van Herk / Gil-Werman: the
--     running max of each block backwards gives the tail's at the start marker, forwards the
--     head's at the end marker, and the window's max is the larger (min likewise).
-- Then each window joins its two markers. A few sorts of buckets + 2 x windows rows, no loop.
-- When the advance divides the size and a bucket lies in at most 16 windows (60 s every 10 s:
-- 6), adding each bucket of the advance to its windows costs less than the markers' sorts and
-- is still at most 16 x the buckets: that is done instead.
CREATE OR REPLACE FUNCTION slidewin.hopping_series(
    p_key text, p_size integer, p_advance integer, p_first timestamptz, p_last timestamptz,
    p_empty boolean DEFAULT false)
RETURNS TABLE (window_start timestamptz, n bigint, total numeric, vmin bigint, vmax bigint)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_custom_plan  -- plan with the actual cuts and range, every call
SET max_parallel_workers_per_gather = 0
SET jit = off  -- estimates of generated series would start the JIT, which costs more than it saves
SET work_mem = '64MB'
AS $$
DECLARE
    v_span interval := make_interval(secs => p_size);
    v_adv  interval := make_interval(secs => p_advance);
    v_end  timestamptz := p_last + v_span;
    v_count bigint := (extract(epoch FROM p_last - p_first) / p_advance)::bigint + 1;
    v_cuts timestamptz[];
BEGIN
    IF p_first IS NULL OR p_last IS NULL OR p_first > p_last THEN
        RETURN;
    END IF;
    IF p_size % p_advance = 0 AND p_size / p_advance <= 16 THEN
        RETURN QUERY
        WITH b AS (
            SELECT r.bucket, r.n, r.total, r.vmin, r.vmax
              FROM slidewin.rollup_buckets(p_advance, p_first, v_end) AS r
             WHERE p_key IS NULL
            UNION ALL
            SELECT k.bucket, k.n, k.total, k.vmin, k.vmax
              FROM slidewin.key_buckets(p_key, p_advance, p_first, v_end) AS k
             WHERE p_key IS NOT NULL
        ), w AS (
            SELECT s.ws, sum(b.n)::bigint AS n, sum(b.total) AS total, min(b.vmin) AS vmin,
                   max(b.vmax) AS vmax
              FROM b
             CROSS JOIN LATERAL generate_series(b.bucket - v_span + v_adv, b.bucket, v_adv)
                   AS s(ws)
             WHERE s.ws >= p_first AND s.ws <= p_last
             GROUP BY s.ws
        )
        SELECT s.ws, coalesce(w.n, 0), w.total, w.vmin, w.vmax
          FROM generate_series(0, v_count - 1) AS k(k)
         CROSS JOIN LATERAL (SELECT p_first + k.k * v_adv AS ws) AS s
          LEFT JOIN w ON w.ws = s.ws
         WHERE p_empty OR w.ws IS NOT NULL;
        RETURN;
    END IF;
    IF p_key IS NULL THEN
        -- no piece may straddle a start, an end or a block boundary
        v_cuts := ARRAY(SELECT generate_series(p_first, p_last, v_adv)
                        UNION ALL SELECT generate_series(p_first + v_span, v_end, v_adv)
                        UNION ALL SELECT generate_series(
                                      slidewin.grain_floor(p_first, p_size) + v_span,
                                      v_end, v_span));
    END IF;
    RETURN QUERY
    WITH x AS (
        SELECT p.bucket AS t, 1 AS ord, NULL::timestamptz AS ws, false AS is_end,
               p.n, p.total, p.vmin, p.vmax
          FROM slidewin.rollup_pieces(v_cuts) AS p
         WHERE p_key IS NULL
        UNION ALL
        SELECT k.bucket, 1, NULL, false, k.n, k.total, k.vmin, k.vmax
          FROM slidewin.key_buckets(p_key, gcd(p_size, p_advance), p_first, v_end) AS k
         WHERE p_key IS NOT NULL
        UNION ALL
        SELECT p_first + s.k * v_adv, 0, p_first + s.k * v_adv, false, NULL, NULL, NULL, NULL
          FROM generate_series(0, v_count - 1) AS s(k)  -- integers: the planner knows how many
        UNION ALL
        SELECT p_first + s.k * v_adv + v_span, 0, p_first + s.k * v_adv, true, NULL, NULL, NULL,
               NULL
          FROM generate_series(0, v_count - 1) AS s(k)
    ), y AS (
        SELECT x.*, floor(date_part('epoch', x.t) / p_size)::bigint AS blk FROM x
    ), z AS (
        SELECT y.ws, y.is_end, sum(y.n) OVER run AS pn, sum(y.total) OVER run AS ptotal,
               min(y.vmin) OVER head AS hmin, max(y.vmax) OVER head AS hmax,
               min(y.vmin) OVER tail AS tmin, max(y.vmax) OVER tail AS tmax
          FROM y
        WINDOW run AS (ORDER BY y.blk, y.t, y.ord ROWS UNBOUNDED PRECEDING),
               head AS (PARTITION BY y.blk ORDER BY y.t, y.ord ROWS UNBOUNDED PRECEDING),
               tail AS (PARTITION BY y.blk ORDER BY y.t DESC, y.ord DESC ROWS UNBOUNDED PRECEDING)
    ), m AS (
        SELECT * FROM z WHERE z.ws IS NOT NULL
    ), w AS (
        SELECT s.ws, (coalesce(e.pn, 0) - coalesce(s.pn, 0))::bigint AS n,
               coalesce(e.ptotal, 0) - coalesce(s.ptotal, 0) AS total,
               least(s.tmin, e.hmin) AS vmin, greatest(s.tmax, e.hmax) AS vmax
          FROM m AS s JOIN m AS e ON e.ws = s.ws AND e.is_end
         WHERE NOT s.is_end
    )
    SELECT w.ws, w.n, CASE WHEN w.n > 0 THEN w.total END, w.vmin, w.vmax
      FROM w
     WHERE p_empty OR w.n > 0;
END
$$;
