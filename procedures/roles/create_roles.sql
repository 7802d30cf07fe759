-- slidewin.create_roles(prefix default 'slidewin'): create the NOLOGIN group roles
-- <prefix>_owner, <prefix>_ingest, <prefix>_jobs and <prefix>_reader where missing, make the
-- calling role a member of the owner (so it can hand the objects over and run `db init` after),
-- record the set in slidewin.role_sets and grant each role what it needs
-- (slidewin.grant_roles). Idempotent: a second call creates nothing and grants again.
-- Needs CREATEROLE (or a superuser). A role of that name that can bypass privileges
-- (SUPERUSER, BYPASSRLS) is refused: it would make the set mean nothing. Returns each role
-- and whether this call created it.
CREATE OR REPLACE FUNCTION slidewin.create_roles(p_prefix text DEFAULT 'slidewin')
RETURNS TABLE (role text, created boolean)
LANGUAGE plpgsql
AS $$
DECLARE
    v_name text;
    v_made boolean;
BEGIN
    IF p_prefix IS NULL OR p_prefix !~ '^[a-z_][a-z0-9_]{0,40}$' THEN
        RAISE EXCEPTION 'role prefix % is not valid; use 1-41 lowercase letters, digits or _, '
                        'starting with a letter or _ (e.g. slidewin)', quote_nullable(p_prefix)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOREACH v_name IN ARRAY ARRAY[p_prefix || '_owner', p_prefix || '_ingest',
                                  p_prefix || '_jobs', p_prefix || '_reader'] LOOP
        v_made := false;
        IF to_regrole(v_name) IS NULL THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', v_name);
                v_made := true;
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL;  -- made at the same moment by a call in another session
            END;
        END IF;
        IF EXISTS (SELECT FROM pg_roles r WHERE r.rolname = v_name
                                           AND (r.rolsuper OR r.rolbypassrls)) THEN
            RAISE EXCEPTION 'role % exists and bypasses privileges (SUPERUSER or BYPASSRLS)',
                            v_name
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = format('ALTER ROLE %I NOSUPERUSER NOBYPASSRLS, or choose another '
                                    'prefix', v_name);
        END IF;
        role := v_name;
        created := v_made;
        RETURN NEXT;
    END LOOP;
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
       AND NOT pg_has_role(current_user, p_prefix || '_owner', 'USAGE') THEN
        EXECUTE format('GRANT %I TO %I', p_prefix || '_owner', current_user);
    END IF;
    INSERT INTO slidewin.role_sets (prefix) VALUES (p_prefix) ON CONFLICT DO NOTHING;
    PERFORM slidewin.grant_roles(p_prefix);
END
$$;
