-- slidewin.sliding(p_size, p_from, p_to): the moving window ending at each second t that holds
-- events, t in [p_from, p_to): seconds t - size through t, both ends inclusive, as Kafka's
-- sliding windows (KIP-450) at the rollups' one-second grain. window_start = t - size and
-- window_end = t are both inclusive here; `final` when t + 1 s <= slidewin.complete_up_to(),
-- `partial` when t - size <= slidewin.retired_through().
-- Read from per-second totals over [p_from - size, p_to): cost grows with the range asked.
CREATE OR REPLACE FUNCTION slidewin.sliding(p_size interval, p_from timestamptz, p_to timestamptz)
RETURNS TABLE (window_start timestamptz, window_end timestamptz, n bigint, total numeric,
               vmin bigint, vmax bigint, avg double precision, final boolean, partial boolean)
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0  -- sub-millisecond work: starting workers costs more
AS $$
DECLARE
    v_size integer := slidewin.window_seconds('size', p_size);
    v_span interval := make_interval(secs => v_size);
    v_done timestamptz := slidewin.complete_up_to();
    v_cut  timestamptz := slidewin.retired_through();
BEGIN
    PERFORM slidewin.check_window_spec(v_size, v_size);
    PERFORM slidewin.check_window_range(p_from, p_to, 1);
    RETURN QUERY
    SELECT w.sec - v_span, w.sec, w.n::bigint, w.total, w.vmin, w.vmax,
           (w.total / w.n)::double precision,
           coalesce(w.sec + interval '1 second' <= v_done, false),
           coalesce(w.sec - v_span <= v_cut, false)
      FROM (SELECT s.sec, sum(s.n) OVER f AS n, sum(s.total) OVER f AS total,
                   min(s.vmin) OVER f AS vmin, max(s.vmax) OVER f AS vmax
              FROM (SELECT r.sec, sum(r.n)::bigint AS n, sum(r.total) AS total,
                           min(r.vmin) AS vmin, max(r.vmax) AS vmax
                      FROM slidewin.rollups r
                     WHERE r.sec >= p_from - v_span AND r.sec < p_to
                     GROUP BY r.sec) AS s
            WINDOW f AS (ORDER BY s.sec RANGE BETWEEN v_span PRECEDING AND CURRENT ROW)) AS w
     WHERE w.sec >= p_from
     ORDER BY w.sec;
END
$$;
