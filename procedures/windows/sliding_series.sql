-- slidewin.sliding_series(p_key, p_size, p_from, p_to): the sliding windows of slidewin.sliding
-- (p_key NULL: every event) and of slidewin.key_window(p_key, 'sliding', ...) -- for each second
-- t in [p_from, p_to) holding events, seconds t - size through t -- with their columns, checks
-- and flags, in one pass over the seconds: the work grows with the seconds read, never with
-- seconds x size.
--
-- Every window has the same length L = size + 1 s. Time is cut into blocks of length L aligned
-- to the epoch, so the window ending with t is the tail of one block (from t - size) and the
-- head of the next (through t) -- van Herk / Gil-Werman: a running max of each block forwards
-- gives the head's at t, backwards the tail's at the window's first second, which the frame
-- [t - size, t] finds as its first row; count and sum move with the frame, each second added
-- once and taken away once (exact: integers and numeric). Three sorts of the seconds read.
--
-- Read: the seconds of [p_from - size, p_to), except that when the range is shorter than the
-- size the stretch [p_to - size, p_from) -- inside every window -- comes whole from the
-- coarsest buckets that fit (slidewin.rollup_pieces), not second by second. With p_key, that
-- key's events per second (slidewin.key_buckets).
CREATE OR REPLACE FUNCTION slidewin.sliding_series(
    p_key text, p_size interval, p_from timestamptz, p_to timestamptz)
RETURNS TABLE (window_start timestamptz, window_end timestamptz, n bigint, total numeric,
               vmin bigint, vmax bigint, avg double precision, final boolean, partial boolean)
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0  -- sub-millisecond work: starting workers costs more
SET enable_hashagg = off  -- the seconds come in index order: group them without a hash
SET jit = off
SET work_mem = '64MB'  -- the sorts of up to 100,000 seconds stay in memory
AS $$
DECLARE
    v_size integer := slidewin.window_seconds('size', p_size);
    v_span interval := make_interval(secs => v_size);
    v_len  integer := v_size + 1;
    v_gap  boolean;
    v_cuts timestamptz[];
    v_done timestamptz := slidewin.complete_up_to();
    v_cut  timestamptz := slidewin.retired_through();
    v_msg   text;
BEGIN
    IF p_key IS NOT NULL THEN
        PERFORM slidewin.check_key(p_key);
    END IF;
    PERFORM slidewin.check_window_spec(v_size, v_size);
    PERFORM slidewin.check_window_range(p_from, p_to, 1);
    -- windows of size + 1 s, one per second of the range at most
    PERFORM slidewin.check_window_work(
        format('sliding windows of %ss', v_size), v_len, 1,
        ceil(extract(epoch FROM p_to - p_from))::bigint,
        CASE WHEN p_key IS NULL THEN ARRAY[1] || slidewin.rollup_grains() ELSE ARRAY[1] END);
    v_gap := p_key IS NULL AND p_to - v_span < p_from;
    IF v_gap THEN  -- the stretch inside every window, cut only at block boundaries
        v_cuts := ARRAY[p_to - v_span, p_from]
                  || ARRAY(SELECT generate_series(
                               slidewin.grain_floor(p_to - v_span, v_len)
                               + make_interval(secs => v_len),
                               p_from, make_interval(secs => v_len)));
    END IF;
    RETURN QUERY
    SELECT w.sec - v_span, w.sec, w.n::bigint, w.total,
           CASE WHEN w.hblk = w.blk THEN w.hmin ELSE least(w.fmin, w.hmin) END,
           CASE WHEN w.hblk = w.blk THEN w.hmax ELSE greatest(w.fmax, w.hmax) END,
           (w.total / w.n)::double precision,
           coalesce(w.sec + interval '1 second' <= v_done, false),
           coalesce(w.sec - v_span <= v_cut, false)
      FROM (SELECT d.sec, d.blk, sum(d.n) OVER f AS n, sum(d.total) OVER f AS total,
                   first_value(d.tmin) OVER f AS fmin, first_value(d.tmax) OVER f AS fmax,
                   first_value(d.blk) OVER f AS hblk, d.hmin, d.hmax
              FROM (SELECT h.*, min(h.vmin) OVER tail AS tmin, max(h.vmax) OVER tail AS tmax
                      FROM (SELECT b.*, min(b.vmin) OVER head AS hmin, max(b.vmax) OVER head AS hmax
                              FROM (SELECT s.sec, s.n, s.total, s.vmin, s.vmax,
                                           floor(date_part('epoch', s.sec) / v_len)::bigint AS blk
                                      FROM (SELECT r.sec, sum(r.n) AS n, sum(r.total) AS total,
                                                   min(r.vmin) AS vmin, max(r.vmax) AS vmax
                                              FROM slidewin.rollups r
                                             WHERE p_key IS NULL AND r.sec >= p_from - v_span
                                               AND r.sec < p_to
                                               AND (NOT v_gap OR r.sec < p_to - v_span
                                                    OR r.sec >= p_from)
                                             GROUP BY r.sec
                                            UNION ALL
                                            SELECT p.bucket, p.n, p.total, p.vmin, p.vmax
                                              FROM slidewin.rollup_pieces(v_cuts) AS p
                                             WHERE v_gap
                                            UNION ALL
                                            SELECT k.bucket, k.n, k.total, k.vmin, k.vmax
                                              FROM slidewin.key_buckets(p_key, 1, p_from - v_span,
                                                                        p_to) AS k
                                             WHERE p_key IS NOT NULL) AS s) AS b
                            WINDOW head AS (PARTITION BY b.blk ORDER BY b.sec)) AS h
                    WINDOW tail AS (PARTITION BY h.blk ORDER BY h.sec DESC)) AS d
            WINDOW f AS (ORDER BY d.sec RANGE BETWEEN v_span PRECEDING AND CURRENT ROW)) AS w
     WHERE w.sec >= p_from
     ORDER BY w.sec;
EXCEPTION WHEN query_canceled THEN  -- statement_timeout: said in words
    GET STACKED DIAGNOSTICS v_msg = MESSAGE_TEXT;
    PERFORM slidewin.window_timed_out(
        CASE WHEN p_key IS NULL THEN 'slidewin.sliding' ELSE 'slidewin.key_window' END, v_msg);
    RAISE;
END
$$;
