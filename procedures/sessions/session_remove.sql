-- slidewin.session_remove(p_name): stop keeping a session window definition. Its sessions go
-- at once from every answer; slidewin.sessions_expire deletes them chunk by chunk (a removal
-- never deletes a number of rows that grows with the table) and then the definition's row.
-- Returns false when no definition in force has that name.
CREATE OR REPLACE FUNCTION slidewin.session_remove(p_name text, p_now timestamptz DEFAULT now())
RETURNS boolean
LANGUAGE sql
AS $$
    WITH d AS (
        UPDATE slidewin.session_defs SET dropped_at = p_now
         WHERE name = p_name AND dropped_at IS NULL
        RETURNING 1
    )
    SELECT count(*) > 0 FROM d
$$;
