-- slidewin.stream_tumbling(stream, measure, size, from, to): tumbling windows over a declared
-- stream -- hopping windows whose advance is their size (see slidewin.stream_hopping).
CREATE OR REPLACE FUNCTION slidewin.stream_tumbling(
    p_stream text, p_measure text, p_size interval, p_from timestamptz, p_to timestamptz,
    p_key text DEFAULT NULL)
RETURNS TABLE (window_start timestamptz, window_end timestamptz, n bigint, cnt bigint,
               total numeric, vmin numeric, vmax numeric, avg double precision,
               final boolean, partial boolean)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    RETURN QUERY SELECT * FROM slidewin.stream_hopping(p_stream, p_measure, p_size, p_size,
                                                       p_from, p_to, p_key);
END
$$;
