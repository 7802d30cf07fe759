-- slidewin.rollups_seconds_add(sec[], n[], total[], vmin[], vmax[]): add a statement's
-- per-(second, partition) aggregates to slidewin.rollups_seconds, one upsert per second, in
-- second order (two writers lock shared seconds in the same order, so never in a cycle).
CREATE OR REPLACE FUNCTION slidewin.rollups_seconds_add(
    p_sec timestamptz[], p_n bigint[], p_total numeric[], p_vmin bigint[], p_vmax bigint[])
RETURNS void
LANGUAGE sql
AS $$
    INSERT INTO slidewin.rollups_seconds AS s (sec, n, total, vmin, vmax)
    SELECT d.sec, sum(d.n), sum(d.total), min(d.vmin), max(d.vmax)
      FROM unnest(p_sec, p_n, p_total, p_vmin, p_vmax) AS d(sec, n, total, vmin, vmax)
     GROUP BY d.sec
     ORDER BY d.sec
    ON CONFLICT (sec) DO UPDATE
       SET n = s.n + excluded.n,
           total = s.total + excluded.total,
           vmin = least(s.vmin, excluded.vmin),
           vmax = greatest(s.vmax, excluded.vmax);
$$;
