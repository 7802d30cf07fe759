-- slidewin.regrant_roles(): slidewin.grant_roles for every role set made in this database
-- (none: nothing to do). Run by `slidewin db init` after it applied the SQL, and by the
-- functions that create tables (stream_define, join_define), so a new object is never left
-- owned by whoever created it, readable by no reader or callable by PUBLIC.
CREATE OR REPLACE FUNCTION slidewin.regrant_roles()
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    v_prefix text;
    v_count  integer := 0;
BEGIN
    FOR v_prefix IN SELECT prefix FROM slidewin.role_sets ORDER BY prefix LOOP
        PERFORM slidewin.grant_roles(v_prefix);
        v_count := v_count + 1;
    END LOOP;
    RETURN v_count;
END
$$;
