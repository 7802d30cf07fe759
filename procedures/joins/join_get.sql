-- slidewin.join_get(name): a join's row, or an error naming it and how to see the joins there are.
CREATE OR REPLACE FUNCTION slidewin.join_get(p_name text)
RETURNS slidewin.joins
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_j slidewin.joins;
BEGIN
    SELECT * INTO v_j FROM slidewin.joins WHERE name = p_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no join named %', coalesce(quote_literal(p_name), 'NULL')
            USING ERRCODE = 'undefined_object',
                  HINT = 'slidewin joins list shows the joins; slidewin joins add defines one';
    END IF;
    RETURN v_j;
END
$$;
