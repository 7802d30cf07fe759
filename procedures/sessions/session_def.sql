-- slidewin.session_def(p_name): the definition in force with that name -- NULL: the only one
-- (slidewin.session_only) -- and an error naming the fix when there is none. What every reader
-- of sessions starts from.
CREATE OR REPLACE FUNCTION slidewin.session_def(p_name text)
RETURNS slidewin.session_defs
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_def slidewin.session_defs;
BEGIN
    SELECT * INTO v_def FROM slidewin.session_defs
     WHERE name = coalesce(p_name, slidewin.session_only()) AND dropped_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no session window named %', coalesce(quote_literal(p_name), 'NULL')
            USING ERRCODE = 'undefined_object',
                  HINT = 'see `slidewin windows list`, or add one: slidewin windows add session NAME --gap 30s';
    END IF;
    RETURN v_def;
END
$$;
