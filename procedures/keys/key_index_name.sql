-- slidewin.key_index_name(stream): where a stream's key index (slidewin.key_index) lives, as a
-- schema and a name for format('%I'): slidewin.events_key_ts for the built-in stream (its name
-- from before declared streams had one), slidewin_streams."<name>#key" for a declared one, beside
-- its table. Never a table's name: a stream's name has no '#', its partitions are "<name>#<i>"
-- and its join indexes "<name>#on_<8 hex>". Refuses a stream that does not exist.
CREATE OR REPLACE FUNCTION slidewin.key_index_name(
    p_stream text, OUT schema_name text, OUT index_name text)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_s record;  -- slidewin.streams, made after this area
BEGIN
    SELECT * INTO v_s FROM slidewin.stream_row(p_stream);
    IF v_s.builtin THEN
        schema_name := 'slidewin';
        index_name := 'events_key_ts';
    ELSE
        schema_name := 'slidewin_streams';
        index_name := v_s.name || '#key';
    END IF;
END
$$;
