-- slidewin.session_define(p_name, p_gap, p_grace, p_retention, p_stream, p_measure): register a
-- session window definition over stream p_stream (default events); from the next insert on,
-- every insert into the stream's table keeps its sessions (slidewin.sessions_on_insert): the
-- session key is the stream's key column, the time its time column.
-- Validation (Kafka's KIP-428), each error naming the parameter, the value and the fix: a name of
-- 1-40 lowercase letters, digits and _, starting with a letter, not in use; gap > 0; grace >= 0;
-- retention >= gap + grace; each at most 100 years (slidewin.check_duration); a stream that
-- exists; a measure that is a required bigint or integer column of it (sessions keep its sum,
-- min and max). p_measure NULL: val for events, else the stream's first measure that is one,
-- else none (sessions count events only). The stream's row is locked, so slidewin.stream_drop
-- either sees the definition or runs first. Returns the definition's id.
DROP FUNCTION IF EXISTS slidewin.session_define(text, interval, interval, interval);
CREATE OR REPLACE FUNCTION slidewin.session_define(
    p_name text, p_gap interval, p_grace interval DEFAULT interval '0',
    p_retention interval DEFAULT NULL, p_stream text DEFAULT 'events',
    p_measure text DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    v_retention interval := coalesce(p_retention, greatest(p_gap + p_grace, interval '1 hour'));
    v_stream  text;  -- slidewin.stream_row's fields (its row type comes later in db init)
    v_builtin boolean;
    v_key     text;
    v_columns jsonb;
    v_measures text[];
    v_measure text := p_measure;
    v_id      integer;
BEGIN
    IF p_name IS NULL OR p_name !~ '^[a-z][a-z0-9_]{0,39}$' THEN
        RAISE EXCEPTION 'name % is not a session window name', coalesce(quote_literal(p_name), 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'use 1-40 lowercase letters, digits and _, starting with a letter (clicks_30s)';
    END IF;
    IF p_gap IS NULL OR p_gap <= interval '0' THEN
        RAISE EXCEPTION 'gap % must be more than 0', coalesce(p_gap::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value', HINT = 'use a gap such as 30s';
    END IF;
    IF p_grace IS NULL OR p_grace < interval '0' THEN
        RAISE EXCEPTION 'grace % must be 0 or more', coalesce(p_grace::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value', HINT = 'use a grace such as 0s or 5s';
    END IF;
    -- at most 100 years each (slidewin.check_duration): a session's times stay timestamps
    PERFORM slidewin.check_duration('gap', p_gap, false);
    PERFORM slidewin.check_duration('grace', p_grace);
    PERFORM slidewin.check_duration('retention', p_retention, false);
    IF v_retention < p_gap + p_grace THEN
        RAISE EXCEPTION 'retention % is shorter than gap % plus grace %', v_retention, p_gap, p_grace
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('use a retention of at least %s (a session must stay until it can close)',
                                p_gap + p_grace);
    END IF;
    SELECT s.name, s.builtin, s.key_column, s.columns, s.measures  -- or the error naming it
      INTO v_stream, v_builtin, v_key, v_columns, v_measures
      FROM slidewin.stream_row(p_stream) AS s;
    IF v_measure IS NULL THEN
        v_measure := CASE WHEN v_builtin THEN 'val' ELSE
            (SELECT m.name FROM unnest(v_measures) WITH ORDINALITY AS m(name, i)
               JOIN jsonb_array_elements(v_columns) c ON c->>'name' = m.name
              WHERE c->>'type' IN ('bigint', 'integer') AND (c->>'required')::boolean
              ORDER BY m.i LIMIT 1) END;
    ELSIF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(v_columns) c
                       WHERE c->>'name' = v_measure AND c->>'type' IN ('bigint', 'integer')
                         AND (c->>'required')::boolean AND v_measure <> v_key) THEN
        RAISE EXCEPTION 'measure % is not a required bigint or integer column of stream %',
                        quote_literal(v_measure), v_stream
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('name one of its columns of those types (slidewin streams show %s), '
                                'or leave the measure out to count events only', v_stream);
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('slidewin.session_define'));
    PERFORM 1 FROM slidewin.streams WHERE name = v_stream FOR KEY SHARE;
    IF NOT FOUND THEN  -- dropped while this waited
        PERFORM slidewin.stream_row(v_stream);
    END IF;
    IF EXISTS (SELECT 1 FROM slidewin.session_defs WHERE name = p_name AND dropped_at IS NULL) THEN
        RAISE EXCEPTION 'a session window named % exists already', p_name
            USING ERRCODE = 'duplicate_object',
                  HINT = format('choose another name, or remove it first (slidewin windows remove %s)', p_name);
    END IF;
    INSERT INTO slidewin.session_defs (name, gap, grace, retention, stream, measure)
    VALUES (p_name, p_gap, p_grace, v_retention, v_stream, v_measure)
    RETURNING id INTO v_id;
    RETURN v_id;
END
$$;
