-- slidewin.key_windows_at(p_key, p_size, p_advance, p_at): Faust's lookups for ONE key -- every
-- hopping window [start, start + size) holding p_at, oldest first, with the key's aggregates
-- (n = 0 for a window without its events); current() is the last row, delta(d) the last row
-- for p_at - d. Reads the key's events of one size-long range (slidewin.key_buckets).
CREATE OR REPLACE FUNCTION slidewin.key_windows_at(
    p_key text, p_size interval, p_advance interval, p_at timestamptz)
RETURNS TABLE (window_start timestamptz, window_end timestamptz, n bigint, total numeric,
               vmin bigint, vmax bigint, avg double precision, final boolean, partial boolean)
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
AS $$
DECLARE
    v_size  integer := slidewin.window_seconds('size', p_size);
    v_adv   integer := slidewin.window_seconds('advance', p_advance);
    v_span  interval := make_interval(secs => v_size);
    v_first timestamptz;
    v_done  timestamptz := slidewin.complete_up_to();
    v_cut   timestamptz := slidewin.retired_through();
BEGIN
    PERFORM slidewin.check_key(p_key);
    PERFORM slidewin.check_window_spec(v_size, v_adv);
    IF p_at IS NULL THEN
        RAISE EXCEPTION 'at is missing (no events yet for stream time?)'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'give a time, e.g. now()';
    END IF;
    v_first := slidewin.grain_floor(p_at - v_span, v_adv) + make_interval(secs => v_adv);
    RETURN QUERY
    WITH b AS MATERIALIZED (
        SELECT * FROM slidewin.key_buckets(p_key, gcd(v_size, v_adv), v_first,
                                           slidewin.grain_floor(p_at, v_adv) + v_span)
    )
    SELECT s.ws, s.ws + v_span, coalesce(sum(b.n), 0)::bigint, sum(b.total), min(b.vmin),
           max(b.vmax), (sum(b.total) / nullif(sum(b.n), 0))::double precision,
           coalesce(s.ws + v_span <= v_done, false), coalesce(s.ws <= v_cut, false)
      FROM generate_series(v_first, slidewin.grain_floor(p_at, v_adv),
                           make_interval(secs => v_adv)) AS s(ws)
      LEFT JOIN b ON b.bucket >= s.ws AND b.bucket < s.ws + v_span
     GROUP BY s.ws
     ORDER BY s.ws;
END
$$;
