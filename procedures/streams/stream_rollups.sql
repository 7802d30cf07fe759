-- slidewin.stream_rollups(stream, grain, cond): a stream's rollups at one of its grains
-- (slidewin.stream_grains) that meet p_cond, a condition on r.sec, as a FROM item for
-- format('%s'): one row per bucket holding rows -- sec (the bucket's start), n (rows) and per
-- measure m: m_n, m_sum, m_min, m_max (and m_nan, m_pinf, m_ninf for a double). A declared
-- stream's are its tables slidewin_rollups.<name> and "<name>#minute"; the built-in events' are
-- slidewin.rollups (grain 1) and slidewin.rollups_coarse, summed over the partitions. p_cond
-- goes inside, before the sum over the partitions, so that it reads an index range even when it
-- names a LATERAL row (PostgreSQL does not push a join's condition into a grouping). This is
-- where the window functions (slidewin.stream_buckets, slidewin.stream_pieces) meet the built-in
-- stream's own tables.
CREATE OR REPLACE FUNCTION slidewin.stream_rollups(p_stream text, p_grain integer, p_cond text)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_builtin boolean;
BEGIN
    SELECT s.builtin INTO STRICT v_builtin FROM slidewin.streams s WHERE s.name = p_stream;
    IF NOT v_builtin THEN
        RETURN format('(SELECT * FROM slidewin_rollups.%I AS r WHERE %s)',
                      CASE WHEN p_grain = 1 THEN p_stream ELSE p_stream || '#minute' END, p_cond);
    END IF;
    RETURN format('(SELECT g.*, g.n AS val_n FROM (SELECT r.sec, sum(r.n)::bigint AS n, '
                  'sum(r.total) AS val_sum, min(r.vmin) AS val_min, max(r.vmax) AS val_max '
                  'FROM (SELECT %s, n, total, vmin, vmax FROM slidewin.%s) AS r '
                  'WHERE %s GROUP BY r.sec) AS g)',
                  CASE WHEN p_grain = 1 THEN 'sec' ELSE 'bucket AS sec' END,
                  CASE WHEN p_grain = 1 THEN 'rollups'
                       ELSE format('rollups_coarse WHERE grain = %s', p_grain) END, p_cond);
END
$$;
