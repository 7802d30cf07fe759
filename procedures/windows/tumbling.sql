-- slidewin.tumbling(p_size, p_from, p_to): tumbling windows [start, start + size) aligned to the
-- epoch -- hopping windows whose advance is their size (see slidewin.hopping for the columns).
CREATE OR REPLACE FUNCTION slidewin.tumbling(p_size interval, p_from timestamptz, p_to timestamptz)
RETURNS TABLE (window_start timestamptz, window_end timestamptz, n bigint, total numeric,
               vmin bigint, vmax bigint, avg double precision, final boolean, partial boolean)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    RETURN QUERY SELECT * FROM slidewin.hopping(p_size, p_size, p_from, p_to);
END
$$;
