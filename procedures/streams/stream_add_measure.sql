-- slidewin.stream_add_measure(stream, column): make a column of a declared stream a measure.
-- The rollup table gains the measure's columns, and each existing second is aggregated again
-- for it -- in one statement whose cost is the rows the stream holds (retention bounds them); a
-- column added by slidewin.stream_add_column with measure => true holds no values yet and is
-- filled by nothing. When the stream's key index is on (slidewin.key_index), it is built again
-- to include the new measure (reading the table once more, writes blocked meanwhile).
CREATE OR REPLACE FUNCTION slidewin.stream_add_measure(p_stream text, p_column text)
RETURNS slidewin.streams
LANGUAGE plpgsql
SET extra_float_digits = 1  -- as in slidewin.stream_rollups_on_insert
AS $$
DECLARE
    v_s    slidewin.streams := slidewin.stream_get(p_stream);
    v_t    text;
    v_d    text;
    v_secs timestamptz[];
    v_row  slidewin.streams;
BEGIN
    IF p_column = ANY(v_s.measures) THEN
        RAISE EXCEPTION 'column % is a measure of stream % already', p_column, p_stream
            USING ERRCODE = 'duplicate_object';
    END IF;
    v_t := slidewin.stream_measure_type(v_s.columns, p_column, v_s.key_column, v_s.time_column);
    FOREACH v_d IN ARRAY slidewin.stream_measure_ddl(p_column, v_t) LOOP
        EXECUTE format('ALTER TABLE slidewin_rollups.%I ADD COLUMN %s', p_stream, v_d);
        EXECUTE format('ALTER TABLE slidewin_rollups.%I ADD COLUMN %s', p_stream || '#minute',
                       v_d);
    END LOOP;
    UPDATE slidewin.streams SET measures = measures || p_column WHERE name = p_stream;
    PERFORM slidewin.stream_rollup_sql(p_stream);
    EXECUTE format('SELECT array_agg(sec) FROM slidewin_rollups.%I', p_stream) INTO v_secs;
    IF v_secs IS NOT NULL THEN
        EXECUTE format('DELETE FROM slidewin_rollups.%I', p_stream);
        EXECUTE (SELECT recompute_sql FROM slidewin.streams WHERE name = p_stream) USING v_secs;
        EXECUTE format('SELECT array_agg(sec) FROM slidewin_rollups.%I', p_stream || '#minute')
            INTO v_secs;
        EXECUTE format('DELETE FROM slidewin_rollups.%I', p_stream || '#minute');
        EXECUTE (SELECT minute_recompute_sql FROM slidewin.streams WHERE name = p_stream)
            USING v_secs;
    END IF;
    IF (SELECT k.key_index FROM slidewin.key_index_status(p_stream) AS k) THEN
        PERFORM slidewin.key_index(true, p_stream);
    END IF;
    SELECT * INTO v_row FROM slidewin.streams WHERE name = p_stream;
    RETURN v_row;
END
$$;
