-- slidewin.stream_window_state(stream, size, advance): check a window over a stream and return
-- what marks its rows: the stream's watermark (windows ending at or before it are final) and how
-- far retention has deleted (windows starting at or before it are partial). Refuses a size that,
-- with the stream's grace, is longer than the stream's history (its oldest seconds would be gone
-- before the window could be final), naming the fix. The built-in events' history is its
-- retention policy's and its cut slidewin.retired_through()'s (slidewin.check_window_spec).
CREATE OR REPLACE FUNCTION slidewin.stream_window_state(
    p_stream text, p_size integer, p_advance integer,
    OUT watermark timestamptz, OUT retired_through timestamptz)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_s slidewin.streams := slidewin.stream_row(p_stream);
    v_h double precision := extract(epoch FROM v_s.history);
    v_g double precision := extract(epoch FROM v_s.grace);
BEGIN
    IF v_s.builtin THEN
        PERFORM slidewin.check_window_spec(p_size, p_advance);
        retired_through := slidewin.retired_through();
    ELSE
        retired_through := v_s.retired_through;
    END IF;
    IF p_advance > p_size THEN
        RAISE EXCEPTION 'advance %s is larger than size %s', p_advance, p_size
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('use an advance of at most %ss (equal to size: tumbling windows)',
                                p_size);
    END IF;
    IF v_h IS NOT NULL AND p_size + v_g > v_h THEN
        RAISE EXCEPTION 'size %s plus stream %''s grace %s is longer than its history %s',
                        p_size, p_stream, v_g, v_h
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('use a size of at most %ss, or keep a longer history '
                                '(slidewin streams alter %s --history ...)',
                                greatest(floor(v_h - v_g), 0), p_stream);
    END IF;
    SELECT st.watermark INTO watermark FROM slidewin.stream_state st WHERE st.stream = p_stream;
END
$$;
