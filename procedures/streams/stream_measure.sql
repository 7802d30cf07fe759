-- slidewin.stream_measure(stream, measure): the measure a window over a stream reads (the
-- built-in events' is val), and its type: the one given, or the stream's only measure when none
-- is given; otherwise an error naming the choices (the CLI's --measure).
CREATE OR REPLACE FUNCTION slidewin.stream_measure(p_stream text, p_measure text,
                                                   OUT measure text, OUT type text)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_s slidewin.streams := slidewin.stream_row(p_stream);
BEGIN
    IF p_measure IS NULL AND cardinality(v_s.measures) = 1 THEN
        p_measure := v_s.measures[1];
    END IF;
    IF p_measure IS NULL OR NOT p_measure = ANY(v_s.measures) THEN
        RAISE EXCEPTION 'stream % has %', p_stream,
            CASE WHEN p_measure IS NULL AND cardinality(v_s.measures) = 0 THEN 'no measure'
                 WHEN p_measure IS NULL THEN 'more than one measure'
                 ELSE format('no measure %s', quote_literal(p_measure)) END
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = CASE WHEN cardinality(v_s.measures) = 0
                              THEN 'add one: slidewin streams alter NAME --measure COLUMN'
                              ELSE format('choose one of: %s (--measure)',
                                          array_to_string(v_s.measures, ', ')) END;
    END IF;
    measure := p_measure;
    SELECT c->>'type' INTO type FROM jsonb_array_elements(v_s.columns) c
     WHERE c->>'name' = p_measure;
END
$$;
