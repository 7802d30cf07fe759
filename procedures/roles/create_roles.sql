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
BEGIN
    RETURN QUERY SELECT s.role, s.created FROM slidewin.create_role_set(p_prefix) AS s;
    PERFORM slidewin.grant_roles(p_prefix);
END
$$;
