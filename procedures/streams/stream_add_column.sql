-- slidewin.stream_add_column(stream, column, type, measure): add a nullable column to a declared
-- stream, optionally as a measure. PostgreSQL adds a nullable column without rewriting the table,
-- and the new measure's rollup columns start at their defaults (no existing row has a value), so
-- the cost does not grow with the table.
CREATE OR REPLACE FUNCTION slidewin.stream_add_column(
    p_stream text, p_column text, p_type text, p_measure boolean DEFAULT false)
RETURNS slidewin.streams
LANGUAGE plpgsql
AS $$
DECLARE
    v_s   slidewin.streams := slidewin.stream_get(p_stream);
    v_t   text;
    v_row slidewin.streams;
BEGIN
    PERFORM slidewin.check_stream_name('column', p_column);
    IF v_s.columns @> jsonb_build_array(jsonb_build_object('name', p_column))
       OR (p_column = 'attrs' AND v_s.keep_extra) THEN
        RAISE EXCEPTION 'stream % has a column % already', p_stream, p_column
            USING ERRCODE = 'duplicate_column';
    END IF;
    v_t := slidewin.stream_type(p_column, p_type);
    EXECUTE format('ALTER TABLE slidewin_streams.%I ADD COLUMN %I %s', p_stream, p_column, v_t);
    UPDATE slidewin.streams
       SET columns = columns || jsonb_build_array(jsonb_build_object(
               'name', p_column, 'type', v_t, 'required', false))
     WHERE name = p_stream;
    IF p_measure THEN
        PERFORM slidewin.stream_add_measure(p_stream, p_column);
    END IF;
    SELECT * INTO v_row FROM slidewin.streams WHERE name = p_stream;
    RETURN v_row;
END
$$;
