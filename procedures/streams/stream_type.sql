-- slidewin.stream_type(p_column, p_type): the canonical name of a column type a stream may
-- declare, or an error naming the column, the type and the choices. Aliases: int -> integer,
-- int8 -> bigint, double/float/float8 -> double precision, bool -> boolean, string -> text,
-- decimal(p,s) -> numeric(p,s), timestamp -> timestamptz (event times are UTC-aware).
CREATE OR REPLACE FUNCTION slidewin.stream_type(p_column text, p_type text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_t text := regexp_replace(lower(btrim(coalesce(p_type, ''))), '\s+', ' ', 'g');
    v_m text[];
BEGIN
    v_t := CASE v_t
        WHEN 'int' THEN 'integer' WHEN 'int4' THEN 'integer' WHEN 'int8' THEN 'bigint'
        WHEN 'double' THEN 'double precision' WHEN 'float' THEN 'double precision'
        WHEN 'float8' THEN 'double precision' WHEN 'bool' THEN 'boolean'
        WHEN 'string' THEN 'text' WHEN 'timestamp' THEN 'timestamptz'
        WHEN 'decimal' THEN 'numeric' ELSE v_t END;
    IF v_t IN ('text', 'bigint', 'integer', 'double precision', 'boolean', 'timestamptz',
               'jsonb', 'numeric') THEN
        RETURN v_t;
    END IF;
    v_m := regexp_match(v_t, '^(?:numeric|decimal) ?\( ?(\d{1,4}) ?(?:, ?(\d{1,4}) ?)?\)$');
    IF v_m IS NOT NULL AND v_m[1]::integer BETWEEN 1 AND 1000
       AND coalesce(v_m[2], '0')::integer <= v_m[1]::integer THEN
        RETURN format('numeric(%s,%s)', v_m[1], coalesce(v_m[2], '0'));
    END IF;
    RAISE EXCEPTION 'column % has type %, which a stream cannot hold', p_column, quote_literal(p_type)
        USING ERRCODE = 'invalid_parameter_value',
              HINT = 'use text, bigint, integer, double precision, numeric, numeric(p,s), '
                     'boolean, timestamptz or jsonb';
END
$$;
