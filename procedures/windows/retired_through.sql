-- slidewin.retired_through(): the newest event time retention has deleted in any partition
-- (slidewin.retention_state), or NULL when retention never deleted. A window starting at or
-- before it may have lost events to retention: its answer is `partial`.
CREATE OR REPLACE FUNCTION slidewin.retired_through()
RETURNS timestamptz
LANGUAGE sql STABLE
AS $$
    SELECT max(retired_through) FROM slidewin.retention_state
$$;
