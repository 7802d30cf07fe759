-- slidewin.windows_at(p_size, p_advance, p_at): Faust's lookups over the built-in stream events
-- -- every hopping window [start, start + size) (starts multiples of advance, aligned to the
-- epoch) that holds the time p_at, oldest first, with the columns of slidewin.hopping; windows
-- without events give n = 0. Faust's current() is the last row (the newest window holding p_at),
-- delta(d) the last row for p_at - d; for tumbling windows (advance = size) there is exactly one
-- row. slidewin.stream_windows_at over events' measure val.
CREATE OR REPLACE FUNCTION slidewin.windows_at(
    p_size interval, p_advance interval, p_at timestamptz)
RETURNS TABLE (window_start timestamptz, window_end timestamptz, n bigint, total numeric,
               vmin bigint, vmax bigint, avg double precision, final boolean, partial boolean)
LANGUAGE plpgsql STABLE
SET slidewin.window_name = 'slidewin.windows_at'  -- a timeout inside names this function
AS $$
BEGIN
    RETURN QUERY
    SELECT h.window_start, h.window_end, h.n, h.total, h.vmin::bigint, h.vmax::bigint, h.avg,
           h.final, h.partial
      FROM slidewin.stream_windows_at('events', 'val', p_size, p_advance, p_at) AS h;
END
$$;
