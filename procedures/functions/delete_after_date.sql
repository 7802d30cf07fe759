-- slidewin.delete_after_date(p_part, p_cutoff, p_chunk): VoltDB DeleteAfterDate.
-- Deletes up to p_chunk of the oldest rows of partition p_part with ts < p_cutoff, oldest first
-- (ties broken by uuid). Returns the rows deleted; fewer than p_chunk means the partition is done.
CREATE OR REPLACE FUNCTION slidewin.delete_after_date(
    p_part integer, p_cutoff timestamptz, p_chunk integer DEFAULT 100)
RETURNS bigint
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM slidewin.check_cutoff(p_cutoff);
    RETURN slidewin.nibble(p_part, p_cutoff, NULL, p_chunk);
END
$$;
