-- slidewin.sliding(p_size, p_from, p_to): the moving window over the built-in stream events
-- ending at each second t that holds events, t in [p_from, p_to): seconds t - size through t,
-- both ends inclusive, as Kafka's sliding windows (KIP-450) at the rollups' one-second grain.
-- window_start = t - size and window_end = t are both inclusive here; `final` when t + 1 s <=
-- slidewin.complete_up_to(), `partial` when t - size <= slidewin.retired_through().
-- slidewin.stream_sliding over events' measure val, in events' own column types (one pass over
-- the seconds read: the cost grows with the range, never with seconds x size).
CREATE OR REPLACE FUNCTION slidewin.sliding(p_size interval, p_from timestamptz, p_to timestamptz)
RETURNS TABLE (window_start timestamptz, window_end timestamptz, n bigint, total numeric,
               vmin bigint, vmax bigint, avg double precision, final boolean, partial boolean)
LANGUAGE plpgsql STABLE
SET slidewin.window_name = 'slidewin.sliding'  -- a timeout inside names this function
AS $$
BEGIN
    RETURN QUERY
    SELECT h.window_start, h.window_end, h.n, h.total, h.vmin::bigint, h.vmax::bigint, h.avg,
           h.final, h.partial
      FROM slidewin.stream_sliding('events', 'val', p_size, p_from, p_to) AS h;
END
$$;
