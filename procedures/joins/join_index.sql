-- slidewin.join_index(stream, column): the (column, time) index a join probes on one stream,
-- created when missing (on every partition, through the parent). Its name is the stream's with a
-- suffix derived from the column: "<stream>#on_<8 hex>".
CREATE OR REPLACE FUNCTION slidewin.join_index(p_stream text, p_column text)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
    v_s    slidewin.streams := slidewin.stream_row(p_stream);
    v_name text := p_stream || '#on_' || left(md5(p_column), 8);
BEGIN
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %s (%I, %I)', v_name,
                   slidewin.stream_table(v_s.name), p_column, v_s.time_column);
    RETURN v_name;
END
$$;
