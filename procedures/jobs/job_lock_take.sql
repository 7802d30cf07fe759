-- slidewin.job_lock_take(name): take job lock `name` (slidewin.job_locks) for this session,
-- without waiting. taken: this session holds it now (it is free, already this session's, or its
-- holder's backend has ended); else holder is the pid of the backend holding it (NULL when it
-- was released meanwhile). A backend counts as a holder only while it is connected to this
-- database as a role that may update the lock: a pid reused by another login holds nothing.
-- Needs UPDATE on slidewin.job_locks (the jobs role, the owner).
CREATE OR REPLACE FUNCTION slidewin.job_lock_take(p_name text)
RETURNS TABLE (taken boolean, holder integer)
LANGUAGE plpgsql
AS $$
BEGIN
    UPDATE slidewin.job_locks l
       SET holder_pid = pg_backend_pid(), held_since = clock_timestamp()
     WHERE l.name = p_name
       AND (l.holder_pid IS NULL OR l.holder_pid = pg_backend_pid()
            OR NOT EXISTS (SELECT FROM pg_stat_activity a
                            WHERE a.pid = l.holder_pid AND a.datname = current_database()
                              AND has_column_privilege(a.usesysid, 'slidewin.job_locks'::regclass,
                                                       'holder_pid', 'UPDATE')));
    IF FOUND THEN
        RETURN QUERY SELECT true, pg_backend_pid();
        RETURN;
    END IF;
    RETURN QUERY SELECT false, l.holder_pid FROM slidewin.job_locks l WHERE l.name = p_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job lock % does not exist', quote_literal(p_name)
            USING ERRCODE = 'undefined_object',
                  HINT = 'run `slidewin db init` (it is idempotent) to upgrade the store';
    END IF;
END
$$;
