-- slidewin.refresh_minute_history(): refresh the per-minute materialized view.
-- Single-flight: a transaction-level advisory lock makes a second concurrent call return false
-- at once instead of queueing. CONCURRENTLY keeps readers unblocked once the view is populated.
-- SECURITY DEFINER: only a materialized view's owner may refresh it, and the retention jobs run
-- as the jobs role (`slidewin db roles`), which is granted EXECUTE on this function alone of
-- the owner's; the search path is pinned so a caller's objects cannot stand in for the view.
CREATE OR REPLACE FUNCTION slidewin.refresh_minute_history()
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext('slidewin.refresh_minute_history')) THEN
        RETURN false;
    END IF;
    IF (SELECT relispopulated FROM pg_class WHERE oid = 'slidewin.minute_history'::regclass) THEN
        REFRESH MATERIALIZED VIEW CONCURRENTLY slidewin.minute_history;
    ELSE
        REFRESH MATERIALIZED VIEW slidewin.minute_history;
    END IF;
    RETURN true;
END
$$;
