-- slidewin.windows_at(p_size, p_advance, p_at): Faust's lookups -- every hopping window
-- [start, start + size) (starts multiples of advance, aligned to the epoch) that holds the time
-- p_at, oldest first, with the columns of slidewin.hopping; windows without events give n = 0.
-- Faust's current() is the last row (the newest window holding p_at), delta(d) the last row for
-- p_at - d; for tumbling windows (advance = size) there is exactly one row.
CREATE OR REPLACE FUNCTION slidewin.windows_at(
    p_size interval, p_advance interval, p_at timestamptz)
RETURNS TABLE (window_start timestamptz, window_end timestamptz, n bigint, total numeric,
               vmin bigint, vmax bigint, avg double precision, final boolean, partial boolean)
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0  -- sub-millisecond work: starting workers costs more
AS $$
DECLARE
    v_size integer := slidewin.window_seconds('size', p_size);
    v_adv  integer := slidewin.window_seconds('advance', p_advance);
    v_done timestamptz := slidewin.complete_up_to();
    v_cut  timestamptz := slidewin.retired_through();
BEGIN
    PERFORM slidewin.check_window_spec(v_size, v_adv);
    IF p_at IS NULL THEN
        RAISE EXCEPTION 'at is missing (no events yet for stream time?)'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'give a time, e.g. now()';
    END IF;
    RETURN QUERY
    SELECT s.ws, s.ws + make_interval(secs => v_size), a.n, a.total, a.vmin, a.vmax,
           (a.total / nullif(a.n, 0))::double precision,
           coalesce(s.ws + make_interval(secs => v_size) <= v_done, false),
           coalesce(s.ws <= v_cut, false)
      FROM generate_series(
               slidewin.grain_floor(p_at - make_interval(secs => v_size), v_adv)
               + make_interval(secs => v_adv),
               slidewin.grain_floor(p_at, v_adv),
               make_interval(secs => v_adv)) AS s(ws)
     CROSS JOIN LATERAL slidewin.rollup_range(s.ws, s.ws + make_interval(secs => v_size)) AS a
     ORDER BY s.ws;
END
$$;
