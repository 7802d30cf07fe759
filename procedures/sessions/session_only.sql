-- slidewin.session_only(): the name of the one session definition in force, so readers may
-- leave the name out when there is one; an error naming the choices when there are several.
CREATE OR REPLACE FUNCTION slidewin.session_only()
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_names text[];
BEGIN
    SELECT array_agg(name ORDER BY name) INTO v_names
      FROM slidewin.session_defs WHERE dropped_at IS NULL;
    IF cardinality(v_names) = 1 THEN
        RETURN v_names[1];
    END IF;
    IF v_names IS NULL THEN
        RAISE EXCEPTION 'no session window is defined'
            USING ERRCODE = 'undefined_object',
                  HINT = 'add one: slidewin windows add session NAME --gap 30s';
    END IF;
    RAISE EXCEPTION 'there are % session windows (%); name one', cardinality(v_names),
                    array_to_string(v_names, ', ')
        USING ERRCODE = 'invalid_parameter_value';
END
$$;
