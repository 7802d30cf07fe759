-- slidewin.key_windows_at(p_key, p_size, p_advance, p_at): Faust's lookups for ONE key of the
-- built-in stream events -- every hopping window [start, start + size) holding p_at, oldest
-- first, with the key's aggregates (n = 0 for a window without its events); current() is the
-- last row, delta(d) the last row for p_at - d. slidewin.stream_windows_at with the key.
CREATE OR REPLACE FUNCTION slidewin.key_windows_at(
    p_key text, p_size interval, p_advance interval, p_at timestamptz)
RETURNS TABLE (window_start timestamptz, window_end timestamptz, n bigint, total numeric,
               vmin bigint, vmax bigint, avg double precision, final boolean, partial boolean)
LANGUAGE plpgsql STABLE
SET slidewin.window_name = 'slidewin.key_windows_at'  -- a timeout inside names this function
AS $$
BEGIN
    PERFORM slidewin.check_key(p_key);
    RETURN QUERY
    SELECT h.window_start, h.window_end, h.n, h.total, h.vmin::bigint, h.vmax::bigint, h.avg,
           h.final, h.partial
      FROM slidewin.stream_windows_at('events', 'val', p_size, p_advance, p_at, p_key) AS h;
END
$$;
