-- slidewin.session_begin(p_def_id): the definition in force with that id, locked for the rest
-- of the transaction, with base_ts set to the stream time committed before the transaction --
-- what every event the transaction writes is judged against (an event older than base_ts -
-- grace is late for the definition). NULL fields when the definition was removed or is unknown.
--
-- Every writer of sessions calls it first (the insert trigger, the ingest sink, sessions_apply,
-- sessions_late): the lock makes writers of one definition take turns, so versions become
-- visible in order, and base_ts is fixed by the transaction's first call, so whether an event is
-- late does not depend on the statements or chunks a batch is written in.
CREATE OR REPLACE FUNCTION slidewin.session_begin(p_def_id integer)
RETURNS slidewin.session_defs
LANGUAGE plpgsql
AS $$
DECLARE
    v_def slidewin.session_defs;
BEGIN
    UPDATE slidewin.session_defs d
       SET base_ts = d.stream_ts, base_xid = pg_current_xact_id()
     WHERE d.id = p_def_id AND d.dropped_at IS NULL
       AND d.base_xid IS DISTINCT FROM pg_current_xact_id()
    RETURNING * INTO v_def;
    IF NOT FOUND THEN  -- this transaction began already (the row is locked), or no such row
        SELECT * INTO v_def FROM slidewin.session_defs d
         WHERE d.id = p_def_id AND d.dropped_at IS NULL FOR UPDATE;
    END IF;
    RETURN v_def;
END
$$;
