-- slidewin.check_duration(p_name, p_value, p_zero): p_value, or invalid_parameter_value naming
-- the parameter, the value, the limit and the fix, unless it lies in 0 .. 100 years (p_zero:
-- 0 allowed; else it must be more than 0). NULL (absent) passes: the caller decides.
-- The owner of the longest duration in SQL (db/limits.py MAX_DURATION in Python, with the
-- reason: event times of years 0001-9999 plus or minus a few such durations stay timestamps;
-- the two must agree). Every definition (stream_define, the streams' retention trigger,
-- join_define, session_define, retention_settings) checks its durations here.
CREATE OR REPLACE FUNCTION slidewin.check_duration(
    p_name text, p_value interval, p_zero boolean DEFAULT true)
RETURNS interval
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_s numeric := extract(epoch FROM p_value);
BEGIN
    IF p_value IS NULL THEN
        RETURN NULL;
    END IF;
    IF v_s < 0 OR (v_s = 0 AND NOT p_zero) THEN
        RAISE EXCEPTION '% % must be %', p_name, slidewin.duration_text(p_value),
                        CASE WHEN p_zero THEN '0 or more' ELSE 'more than 0' END
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('give --%s a duration such as 1s, 30s or 5m', p_name);
    END IF;
    IF v_s > 3153600000 THEN  -- 36500 days of 86400 s
        RAISE EXCEPTION '% % is longer than the limit of 100 years (36500d)', p_name,
                        CASE WHEN v_s < 1e12 THEN slidewin.duration_text(p_value)
                             ELSE p_value::text END
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('give --%s a shorter duration (at most 36500d)', p_name);
    END IF;
    RETURN p_value;
END
$$;
