-- slidewin.rollups_add(...): merge per-(second, partition) aggregates of inserted rows.
--
-- Contract: arrays are parallel, one element per (sec, part); rows are upserted in (sec, part)
-- order so concurrent writers take row locks in one order and cannot deadlock each other; then
-- the coarse grains (slidewin.rollups_coarse_add), in their own one order, always after seconds.
-- Every insert also signals channel 'slidewin_rollups' with payload 'insert' (delivered at
-- commit, once per transaction however many statements): watchers such as the client's max
-- tracker LISTEN and query only after a change instead of polling the table 100 times a second.
CREATE OR REPLACE FUNCTION slidewin.rollups_add(
    p_sec timestamptz[], p_part smallint[], p_n bigint[], p_total numeric[],
    p_vmin bigint[], p_vmax bigint[])
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO slidewin.rollups AS r (sec, part, n, total, vmin, vmax)
    SELECT d.sec, d.part, d.n, d.total, d.vmin, d.vmax
    FROM unnest(p_sec, p_part, p_n, p_total, p_vmin, p_vmax) AS d(sec, part, n, total, vmin, vmax)
    ORDER BY d.sec, d.part
    ON CONFLICT (sec, part) DO UPDATE
       SET n = r.n + excluded.n,
           total = r.total + excluded.total,
           vmin = least(r.vmin, excluded.vmin),
           vmax = greatest(r.vmax, excluded.vmax);
    PERFORM slidewin.rollups_coarse_add(p_sec, p_part, p_n, p_total, p_vmin, p_vmax);
    PERFORM pg_notify('slidewin_rollups', 'insert');
END
$$;
