-- slidewin.sliding(p_size, p_from, p_to): the moving window ending at each second t that holds
-- events, t in [p_from, p_to): seconds t - size through t, both ends inclusive, as Kafka's
-- sliding windows (KIP-450) at the rollups' one-second grain. window_start = t - size and
-- window_end = t are both inclusive here; `final` when t + 1 s <= slidewin.complete_up_to(),
-- `partial` when t - size <= slidewin.retired_through().
-- Computed by slidewin.sliding_series in one pass over the seconds read: the cost grows with the
-- range and the size's coarse buckets, never with seconds x size. A plain SQL function, so
-- that a query over it reads sliding_series' rows directly.
CREATE OR REPLACE FUNCTION slidewin.sliding(p_size interval, p_from timestamptz, p_to timestamptz)
RETURNS TABLE (window_start timestamptz, window_end timestamptz, n bigint, total numeric,
               vmin bigint, vmax bigint, avg double precision, final boolean, partial boolean)
LANGUAGE sql STABLE
AS $$
    SELECT * FROM slidewin.sliding_series(NULL, p_size, p_from, p_to)
$$;
