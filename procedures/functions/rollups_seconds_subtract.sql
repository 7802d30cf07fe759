-- slidewin.rollups_seconds_subtract(sec[], n[], total[], vmin[], vmax[]): take a statement's
-- deleted per-(second, partition) aggregates out of slidewin.rollups_seconds. Called by
-- rollups_subtract after it changed the per-partition rows, so a second that lost its minimum
-- or maximum gets it again from those rows (every partition of that second: a few rows).
--
-- The seconds are locked first, in order, and the recount is a later statement: under READ
-- COMMITTED it sees what another partition's nibble of the same second committed while this one
-- waited for the lock (parallel nibbles of different partitions share these rows).
CREATE OR REPLACE FUNCTION slidewin.rollups_seconds_subtract(
    p_sec timestamptz[], p_n bigint[], p_total numeric[], p_vmin bigint[], p_vmax bigint[])
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_sec  timestamptz[];  v_n  bigint[];  v_t  numeric[];  v_lo bigint[];  v_hi bigint[];
    v_zero timestamptz[];
    v_fix  timestamptz[];
BEGIN
    SELECT array_agg(d.sec ORDER BY d.sec), array_agg(d.n ORDER BY d.sec),
           array_agg(d.total ORDER BY d.sec), array_agg(d.vmin ORDER BY d.sec),
           array_agg(d.vmax ORDER BY d.sec)
      INTO v_sec, v_n, v_t, v_lo, v_hi
      FROM (SELECT u.sec, sum(u.n) AS n, sum(u.total) AS total, min(u.vmin) AS vmin,
                   max(u.vmax) AS vmax
              FROM unnest(p_sec, p_n, p_total, p_vmin, p_vmax) AS u(sec, n, total, vmin, vmax)
             GROUP BY u.sec) AS d;
    IF v_sec IS NULL THEN
        RETURN;
    END IF;

    PERFORM 1
       FROM slidewin.rollups_seconds s
      WHERE s.sec = ANY (v_sec)
      ORDER BY s.sec
        FOR UPDATE OF s;

    WITH upd AS (
        UPDATE slidewin.rollups_seconds s
           SET n = s.n - z.n, total = s.total - z.total
          FROM unnest(v_sec, v_n, v_t, v_lo, v_hi) AS z(sec, n, total, vmin, vmax)
         WHERE s.sec = z.sec
        RETURNING s.sec, s.n AS left_n, (z.vmin <= s.vmin OR z.vmax >= s.vmax) AS lost_extreme
    )
    SELECT array_agg(sec) FILTER (WHERE left_n = 0),
           array_agg(sec) FILTER (WHERE left_n > 0 AND lost_extreme)
      INTO v_zero, v_fix
      FROM upd;

    IF v_zero IS NOT NULL THEN
        DELETE FROM slidewin.rollups_seconds s WHERE s.sec = ANY (v_zero);
    END IF;
    IF v_fix IS NOT NULL THEN
        UPDATE slidewin.rollups_seconds s
           SET vmin = m.vmin, vmax = m.vmax
          FROM unnest(v_fix) AS z(sec)
          CROSS JOIN LATERAL (SELECT min(r.vmin) AS vmin, max(r.vmax) AS vmax
                                FROM slidewin.rollups r WHERE r.sec = z.sec) AS m
         WHERE s.sec = z.sec;
    END IF;
END
$$;
