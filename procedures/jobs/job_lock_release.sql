-- slidewin.job_lock_release(name): release job lock `name` if this session holds it; true when
-- it did. A session that ends releases nothing here, but holds nothing either (job_lock_take).
CREATE OR REPLACE FUNCTION slidewin.job_lock_release(p_name text)
RETURNS boolean
LANGUAGE sql
AS $$
    WITH r AS (
        UPDATE slidewin.job_locks SET holder_pid = NULL, held_since = NULL
         WHERE name = p_name AND holder_pid = pg_backend_pid()
        RETURNING 1
    )
    SELECT count(*) > 0 FROM r;
$$;
