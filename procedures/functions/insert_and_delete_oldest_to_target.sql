-- slidewin.insert_and_delete_oldest_to_target(p_uuid, p_val, p_ts, p_target_rows, p_chunk):
-- VoltDB InsertAndDeleteOldestToTarget -- insert one event, then nibble its partition down
-- toward p_target_rows in the same transaction. Returns the rows deleted.
CREATE OR REPLACE FUNCTION slidewin.insert_and_delete_oldest_to_target(
    p_uuid text, p_val bigint, p_ts timestamptz, p_target_rows bigint, p_chunk integer DEFAULT 100)
RETURNS bigint
LANGUAGE plpgsql
AS $$
BEGIN
    RETURN slidewin.delete_oldest_to_target(
        slidewin.insert_event(p_uuid, p_val, p_ts), p_target_rows, p_chunk);
END
$$;
