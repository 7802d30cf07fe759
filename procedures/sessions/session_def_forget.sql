-- slidewin.session_def_forget(id): delete the row of session window definition `id` once it is
-- removed (dropped_at set) and none of its sessions or tombstones is left; true when it did.
-- The last step of slidewin.sessions_expire, which the jobs role runs: SECURITY DEFINER so that
-- the jobs may delete such a row -- and only such a row -- without DELETE on the definitions
-- (a definition in force stays the owner's to remove). The search path is pinned, pg_temp last.
CREATE OR REPLACE FUNCTION slidewin.session_def_forget(p_def_id integer)
RETURNS boolean
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    WITH gone AS (
        DELETE FROM slidewin.session_defs d
         WHERE d.id = p_def_id AND d.dropped_at IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM slidewin.session_store s WHERE s.def_id = d.id)
           AND NOT EXISTS (SELECT 1 FROM slidewin.session_tombstones t WHERE t.def_id = d.id)
        RETURNING 1
    )
    SELECT count(*) > 0 FROM gone;
$$;
