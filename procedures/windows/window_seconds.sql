-- slidewin.window_seconds(p_name, p_value): p_value (a window size or advance) as whole seconds,
-- or invalid_parameter_value naming the parameter, the value and the fix (KIP-428's model).
-- Whole seconds because the rollups' grain is one second; at most 7 days.
CREATE OR REPLACE FUNCTION slidewin.window_seconds(p_name text, p_value interval)
RETURNS integer
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_s numeric := extract(epoch FROM p_value);
BEGIN
    IF p_value IS NULL THEN
        RAISE EXCEPTION '% is missing', p_name
            USING ERRCODE = 'invalid_parameter_value', HINT = format('give a %s, e.g. 10s', p_name);
    END IF;
    IF v_s <= 0 OR v_s <> trunc(v_s) OR v_s > 604800 THEN
        RAISE EXCEPTION '% must be a whole number of seconds from 1s to 7d, got %', p_name, p_value
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('windows are read from per-second rollups: use e.g. %s 10s, 1m or 1h',
                                p_name);
    END IF;
    RETURN v_s::integer;
END
$$;
