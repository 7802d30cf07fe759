-- slidewin.check_count_windows(p_size, p_advance, p_rows): refuse a count-window request no
-- window function can answer, naming the parameter, the value and the fix: size 1..1,000,000
-- events, advance 1..size, rows size..1,000,000 (slidewin.count_windows and
-- slidewin.stream_count_windows, after their defaults are applied).
CREATE OR REPLACE FUNCTION slidewin.check_count_windows(
    p_size integer, p_advance integer, p_rows integer)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_adv  integer := p_advance;
    v_rows integer := p_rows;
BEGIN
    IF p_size IS NULL OR p_size < 1 OR p_size > 1000000 THEN
        RAISE EXCEPTION 'size must be from 1 to 1000000 events, got %', coalesce(p_size::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value', HINT = 'e.g. size 10000';
    END IF;
    IF v_adv < 1 OR v_adv > p_size THEN
        RAISE EXCEPTION 'advance must be from 1 to size (%) events, got %', p_size, v_adv
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'use an advance no larger than size (equal: tumbling windows)';
    END IF;
    IF v_rows < p_size OR v_rows > 1000000 THEN
        RAISE EXCEPTION 'rows must be from size (%) to 1000000 events, got %', p_size, v_rows
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'rows is how many of the newest events the windows cover';
    END IF;
END
$$;
