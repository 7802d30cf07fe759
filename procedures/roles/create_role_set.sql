-- slidewin.create_role_set(prefix default 'slidewin'): the first half of
-- slidewin.create_roles -- create the NOLOGIN group roles <prefix>_owner, _ingest, _jobs and
-- _reader where missing, make the calling role a member of the owner and record the set in
-- slidewin.role_sets -- without granting anything: it locks no table, so `slidewin db roles`
-- can make the roles, hand the objects over one at a time and grant after, while the ingest
-- and the jobs run. Returns each role and whether this call created it. Needs CREATEROLE.
CREATE OR REPLACE FUNCTION slidewin.create_role_set(p_prefix text DEFAULT 'slidewin')
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
END
$$;
