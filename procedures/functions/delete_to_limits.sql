-- slidewin.delete_to_limits(p_part, p_cutoff, p_target_rows, p_chunk): both limits at once
-- (VoltDB refuses the combination). Deletes up to p_chunk of the oldest rows of partition p_part
-- that are older than p_cutoff or beyond the newest p_target_rows. Returns the rows deleted.
CREATE OR REPLACE FUNCTION slidewin.delete_to_limits(
    p_part integer, p_cutoff timestamptz, p_target_rows bigint, p_chunk integer DEFAULT 100)
RETURNS bigint
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM slidewin.check_cutoff(p_cutoff);
    PERFORM slidewin.check_target_rows(p_target_rows);
    RETURN slidewin.nibble(p_part, p_cutoff, p_target_rows, p_chunk);
END
$$;
