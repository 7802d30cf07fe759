-- slidewin.check_stream_name(p_what, p_name): refuse a stream or column name that is not
-- 1-48 (stream, join) or 1-56 (column) lower-case letters, digits and '_', starting with a letter, in
-- one line naming what was refused and the rule. Every name reaches DDL through format('%I')
-- anyway; the rule keeps names a psql user can type unquoted and leaves room for the rollup
-- columns' suffixes (_n, _sum, _min, _max, _nan, _pinf, _ninf).
CREATE OR REPLACE FUNCTION slidewin.check_stream_name(p_what text, p_name text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_max integer := CASE WHEN p_what IN ('stream', 'join') THEN 48 ELSE 56 END;
BEGIN
    IF p_name IS NULL OR p_name !~ format('^[a-z][a-z0-9_]{0,%s}$', v_max - 1) THEN
        RAISE EXCEPTION '% name % is not allowed', p_what, coalesce(quote_literal(p_name), 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('use 1-%s lower-case letters, digits or _, starting with a letter',
                                v_max);
    END IF;
    RETURN p_name;
END
$$;
