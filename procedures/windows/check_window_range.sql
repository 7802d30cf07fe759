-- slidewin.check_window_range(p_from, p_to, p_step): refuse a range that is missing, backwards,
-- or would hold more than 100000 windows of p_step seconds -- the cap that keeps every window
-- series bounded by what was asked, never by the table.
CREATE OR REPLACE FUNCTION slidewin.check_window_range(
    p_from timestamptz, p_to timestamptz, p_step integer)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_from IS NULL OR p_to IS NULL THEN
        RAISE EXCEPTION 'from and to are required, got from % and to %',
                        coalesce(p_from::text, 'NULL'), coalesce(p_to::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'give both ends, e.g. now() - interval ''1 hour'' and now()';
    END IF;
    IF p_to < p_from THEN
        RAISE EXCEPTION 'to % is before from %', p_to, p_from
            USING ERRCODE = 'invalid_parameter_value', HINT = 'swap them';
    END IF;
    IF extract(epoch FROM p_to - p_from) / p_step > 100000 THEN
        RAISE EXCEPTION 'from % to % holds more than 100000 windows of %s', p_from, p_to, p_step
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'ask for a shorter range or a larger advance';
    END IF;
END
$$;
