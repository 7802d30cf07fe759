-- slidewin.delete_oldest_to_target(p_part, p_target_rows, p_chunk): VoltDB DeleteOldestToTarget.
-- Deletes up to p_chunk of the oldest rows of partition p_part while it holds more than
-- p_target_rows rows (counted from the exact rollups, not the table). Returns the rows deleted.
CREATE OR REPLACE FUNCTION slidewin.delete_oldest_to_target(
    p_part integer, p_target_rows bigint, p_chunk integer DEFAULT 100)
RETURNS bigint
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM slidewin.check_target_rows(p_target_rows);
    RETURN slidewin.nibble(p_part, NULL, p_target_rows, p_chunk);
END
$$;
