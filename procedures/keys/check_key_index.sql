-- slidewin.check_key_index(stream): refuses, naming the fix, unless the stream's key index
-- (slidewin.key_index) is on. A key's count windows have no time range to bound them: their
-- rows are that key's newest, which only the key index finds without reading the whole table
-- newest first.
CREATE OR REPLACE FUNCTION slidewin.check_key_index(p_stream text)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_at record;
    v_builtin boolean;
BEGIN
    SELECT * INTO v_at FROM slidewin.key_index_name(p_stream);
    SELECT builtin INTO v_builtin FROM slidewin.stream_row(p_stream);
    IF to_regclass(format('%I.%I', v_at.schema_name, v_at.index_name)) IS NULL THEN
        RAISE EXCEPTION 'count windows of one key read its newest events through the key '
                        'index, which is off: slidewin windows key-index enable%',
                        CASE WHEN v_builtin THEN '' ELSE format(' --stream %s', p_stream) END
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'it costs each insert one more index (slidewin bench sessions)';
    END IF;
END
$$;
