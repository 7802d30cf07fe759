-- slidewin.hopping(p_size, p_advance, p_from, p_to): hopping windows [start, start + size) over
-- the built-in stream events, starts aligned to the epoch at multiples of advance (Kafka Streams'
-- TimeWindows, Spark's window()), one row per window holding events, for every window starting
-- in [p_from, p_to).
--
-- Each row: the window, count/sum/min/max/avg of its events, `final` (window_end <=
-- slidewin.complete_up_to(): no event the ingest can still accept falls in it) and `partial`
-- (retention has deleted events at or after its start: slidewin.retired_through()).
-- slidewin.stream_hopping over events' measure val, in events' own column types: the one
-- implementation of every stream's windows (its cost: buckets + windows, never windows x size).
CREATE OR REPLACE FUNCTION slidewin.hopping(
    p_size interval, p_advance interval, p_from timestamptz, p_to timestamptz)
RETURNS TABLE (window_start timestamptz, window_end timestamptz, n bigint, total numeric,
               vmin bigint, vmax bigint, avg double precision, final boolean, partial boolean)
LANGUAGE plpgsql STABLE
SET slidewin.window_name = 'slidewin.hopping'  -- a timeout inside names this function
AS $$
BEGIN
    RETURN QUERY
    SELECT h.window_start, h.window_end, h.n, h.total, h.vmin::bigint, h.vmax::bigint, h.avg,
           h.final, h.partial
      FROM slidewin.stream_hopping('events', 'val', p_size, p_advance, p_from, p_to) AS h;
END
$$;
