-- slidewin.session_def(p_name): the definition in force with that name -- NULL: the only one
-- (slidewin.session_only) -- and an error naming the fix when there is none. What every reader
-- of sessions starts from.
--
-- The name is resolved in PL/pgSQL, never as coalesce(p_name, slidewin.session_only()) inside
-- the query: PostgreSQL estimates a generic plan's expressions by running their stable
-- functions, so from a connection's sixth call on session_only() ran -- and failed with two
-- definitions -- even when a name was given.
CREATE OR REPLACE FUNCTION slidewin.session_def(p_name text)
RETURNS slidewin.session_defs
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_def  slidewin.session_defs;
    v_name text := p_name;
BEGIN
    IF v_name IS NULL THEN
        v_name := slidewin.session_only();
    END IF;
    SELECT * INTO v_def FROM slidewin.session_defs WHERE name = v_name AND dropped_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no session window named %', coalesce(quote_literal(p_name), 'NULL')
            USING ERRCODE = 'undefined_object',
                  HINT = 'see `slidewin windows list`, or add one: slidewin windows add session NAME --gap 30s';
    END IF;
    RETURN v_def;
END
$$;
