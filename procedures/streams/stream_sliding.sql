-- slidewin.stream_sliding(stream, measure, size, from, to, key): the moving window ending at each
-- second t that holds rows, t in [from, to), over seconds t - size through t (both ends
-- inclusive: Kafka's sliding windows, KIP-450, at the rollups' one-second grain); columns as
-- slidewin.stream_hopping, `final` when t + 1 s <= the watermark, `partial` when t - size <= the
-- retention cut. With p_key, that key's rows per second (slidewin.stream_buckets).
--
-- One pass over the seconds read: every window has the same length L = size + 1 s. Time is cut
-- into blocks of length L aligned to the epoch, so the window ending with t is the tail of one
-- block (from t - size) and the head of the next (through t) -- van Herk / Gil-Werman: a running
-- min and max of each block forwards gives the head's at t, backwards the tail's at the window's
-- first second, which the frame [t - size, t] finds as its first row; the sums move with the
-- frame, each second added once and taken away once (exact). Three sorts of the seconds read,
-- never seconds x size. When the range is shorter than the size, the stretch [to - size, from)
-- inside every window comes whole from the coarsest grains that fit (slidewin.stream_pieces),
-- not second by second.
CREATE OR REPLACE FUNCTION slidewin.stream_sliding(
    p_stream text, p_measure text, p_size interval, p_from timestamptz, p_to timestamptz,
    p_key text DEFAULT NULL)
RETURNS TABLE (window_start timestamptz, window_end timestamptz, n bigint, cnt bigint,
               total numeric, vmin numeric, vmax numeric, avg double precision,
               final boolean, partial boolean)
LANGUAGE plpgsql STABLE
SET extra_float_digits = 1  -- a double's min and max as its shortest round-trip decimal
SET max_parallel_workers_per_gather = 0
SET jit = off
SET work_mem = '64MB'  -- the sorts of up to 100,000 seconds stay in memory
AS $$
DECLARE
    v_size  integer := slidewin.window_seconds('size', p_size);
    v_span  interval := make_interval(secs => v_size);
    v_len   integer := v_size + 1;
    v_state record := slidewin.stream_window_state(p_stream, v_size, v_size);
    v_m     record := slidewin.stream_measure(p_stream, p_measure);
    v_dbl   boolean := v_m.type = 'double precision';
    v_gap   boolean;
    v_cuts  timestamptz[];
    v_src   text;
    v_msg   text;
BEGIN
    IF p_key IS NOT NULL AND (slidewin.stream_row(p_stream)).builtin THEN
        PERFORM slidewin.check_key(p_key);  -- a key no event of the built-in stream can have
    END IF;
    PERFORM slidewin.check_window_range(p_from, p_to, 1);
    PERFORM slidewin.check_window_work(
        format('sliding windows of %ss%s', v_size,
               CASE WHEN p_key IS NOT NULL THEN ' for one key' ELSE '' END), v_len, 1,
        ceil(extract(epoch FROM p_to - p_from))::bigint,
        CASE WHEN p_key IS NULL THEN slidewin.stream_grains(p_stream) ELSE ARRAY[1] END);
    v_gap := p_key IS NULL AND p_to - v_span < p_from;
    IF v_gap THEN  -- the stretch inside every window, cut only at block boundaries
        v_cuts := ARRAY[p_to - v_span, p_from]
                  || ARRAY(SELECT generate_series(
                               slidewin.grain_floor(p_to - v_span, v_len)
                               + make_interval(secs => v_len),
                               p_from, make_interval(secs => v_len)));
        v_src := 'SELECT * FROM slidewin.stream_buckets($1, $2, 1, $3 - $5, $6) '
                 'UNION ALL SELECT * FROM slidewin.stream_pieces($1, $2, $7) '
                 'UNION ALL SELECT * FROM slidewin.stream_buckets($1, $2, 1, $3, $4)';
    ELSE
        v_src := 'SELECT * FROM slidewin.stream_buckets($1, $2, 1, $3 - $5, $4, $8)';
    END IF;
    RETURN QUERY EXECUTE format(
    'SELECT w.sec - $5, w.sec, w.n::bigint, w.cnt::bigint,
            CASE WHEN w.cnt > 0 THEN slidewin.stream_total(w.total, w.nan::bigint,
                                                           w.pinf::bigint, w.ninf::bigint) END,
            (CASE WHEN w.fblk = w.blk THEN w.hmin ELSE least(w.fmin, w.hmin) END)%1$s,
            (CASE WHEN w.fblk = w.blk THEN w.hmax ELSE greatest(w.fmax, w.hmax) END)%1$s,
            (slidewin.stream_total(w.total, w.nan::bigint, w.pinf::bigint, w.ninf::bigint)
             / nullif(w.cnt, 0))::double precision,
            coalesce(w.sec + interval ''1 second'' <= $9, false),
            coalesce(w.sec - $5 <= $10, false)
       FROM (SELECT d.sec, d.blk, sum(d.n) OVER f AS n, sum(d.cnt) OVER f AS cnt,
                    sum(d.total) OVER f AS total, %2$s,
                    first_value(d.tmin) OVER f AS fmin, first_value(d.tmax) OVER f AS fmax,
                    first_value(d.blk) OVER f AS fblk, d.hmin, d.hmax
               FROM (SELECT h.*, min(h.lo) OVER tail AS tmin, max(h.hi) OVER tail AS tmax
                       FROM (SELECT b.*, min(b.lo) OVER head AS hmin, max(b.hi) OVER head AS hmax
                               FROM (SELECT s.bucket AS sec, s.n, s.cnt, s.total, s.nan, s.pinf,
                                            s.ninf, s.%3$I AS lo, s.%4$I AS hi,
                                            floor(date_part(''epoch'', s.bucket) / $11)::bigint
                                            AS blk
                                       FROM (%5$s) AS s) AS b
                             WINDOW head AS (PARTITION BY b.blk ORDER BY b.sec)) AS h
                     WINDOW tail AS (PARTITION BY h.blk ORDER BY h.sec DESC)) AS d
             WINDOW f AS (ORDER BY d.sec RANGE BETWEEN $5 PRECEDING AND CURRENT ROW)) AS w
      WHERE w.sec >= $3
      ORDER BY w.sec',
        CASE WHEN v_dbl THEN '::text::numeric' ELSE '' END,
        CASE WHEN v_dbl THEN 'sum(d.nan) OVER f AS nan, sum(d.pinf) OVER f AS pinf, '
                             'sum(d.ninf) OVER f AS ninf'
             ELSE '0 AS nan, 0 AS pinf, 0 AS ninf' END,
        CASE WHEN v_dbl THEN 'fmin' ELSE 'vmin' END, CASE WHEN v_dbl THEN 'fmax' ELSE 'vmax' END,
        v_src)
    USING p_stream, p_measure, p_from, p_to, v_span, p_to - v_span, v_cuts, p_key,
          v_state.watermark, v_state.retired_through, v_len;
EXCEPTION WHEN query_canceled THEN  -- statement_timeout: said in words
    GET STACKED DIAGNOSTICS v_msg = MESSAGE_TEXT;
    PERFORM slidewin.window_timed_out('slidewin.stream_sliding', v_msg);
    RAISE;
END
$$;
