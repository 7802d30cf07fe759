-- slidewin.insert_and_delete_after_date(p_uuid, p_val, p_ts, p_cutoff, p_chunk): VoltDB
-- InsertAndDeleteAfterDate -- insert one event, then nibble its partition in the same
-- transaction. Returns the rows deleted.
CREATE OR REPLACE FUNCTION slidewin.insert_and_delete_after_date(
    p_uuid text, p_val bigint, p_ts timestamptz, p_cutoff timestamptz, p_chunk integer DEFAULT 100)
RETURNS bigint
LANGUAGE plpgsql
AS $$
BEGIN
    RETURN slidewin.delete_after_date(slidewin.insert_event(p_uuid, p_val, p_ts), p_cutoff, p_chunk);
END
$$;
