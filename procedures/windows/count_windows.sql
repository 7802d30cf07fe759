-- slidewin.count_windows(p_size, p_advance, p_rows): count ("tuple") windows, as Samza's -- over
-- the newest p_rows events in (ts, uuid) order (the nibbles' order; (uuid, ts) is an event's
-- identity, so the order is total). Window 1 is the newest p_size events, each next one starts
-- p_advance events older; only windows that fit in p_rows are returned, and a store holding
-- fewer events gives shorter windows (n < p_size). VoltDB's "last N rows" is
-- count_windows(N, N, N). window_start/window_end are the oldest/newest event times in it.
--
-- Bounded by p_rows, never by the table: the rollups (newest seconds first) give the second
-- where the newest p_rows events begin, then each partition reads its index from there (for one
-- window, the last p_size events, only that second's rows: the newer seconds come from rollups).
CREATE OR REPLACE FUNCTION slidewin.count_windows(
    p_size integer, p_advance integer DEFAULT NULL, p_rows integer DEFAULT NULL)
RETURNS TABLE (window_no integer, window_start timestamptz, window_end timestamptz, n bigint,
               total numeric, vmin bigint, vmax bigint, avg double precision)
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0  -- sub-millisecond work: starting workers costs more
SET enable_bitmapscan = off  -- read each primary key backwards, in order, instead of sorting
AS $$
DECLARE
    v_adv  integer := coalesce(p_advance, p_size);
    v_rows integer := coalesce(p_rows, p_size);
    v_from timestamptz;
    v_parts text;
    v_n      bigint;
    v_total  numeric;
    v_min    bigint;
    v_max    bigint;
    v_bn     bigint;
    v_btotal numeric;
    v_bmin   bigint;
    v_bmax   bigint;
    v_first  timestamptz;
    v_last   timestamptz;
BEGIN
    PERFORM slidewin.check_count_windows(p_size, v_adv, v_rows);
    SELECT c.sec INTO v_from
      FROM (SELECT s.sec, sum(s.n) OVER (ORDER BY s.sec DESC) AS upto
              FROM (SELECT r.sec, sum(r.n) AS n FROM slidewin.rollups r
                     GROUP BY r.sec ORDER BY r.sec DESC) AS s) AS c
     WHERE c.upto >= v_rows
     LIMIT 1;
    v_from := coalesce(v_from, '-infinity');
    -- Each partition's primary key (part, ts, uuid) read backwards from that second, merged in
    -- (ts, uuid) order: no sort of the rows, and EXECUTE plans with the actual second.
    SELECT string_agg(format('(SELECT ts, uuid, val FROM slidewin.%I WHERE part = %s AND ts >= $1 '
                             'ORDER BY ts DESC, uuid DESC LIMIT $2)',
                             slidewin.partition_name(k), k), ' UNION ALL ')
      INTO v_parts FROM slidewin.partition_keys() AS k;
    IF v_rows = p_size THEN
        -- One window, the last p_size events: the seconds after v_from whole, from the rollups;
        -- of second v_from itself only its newest events, read from the rows -- so the rows
        -- read are one second's, not p_size.
        SELECT coalesce(sum(r.n), 0), sum(r.total), min(r.vmin), max(r.vmax)
          INTO v_n, v_total, v_min, v_max
          FROM slidewin.rollups r WHERE r.sec > v_from;
        EXECUTE format('SELECT count(*), sum(val), min(val), max(val), min(ts) FROM '
                       '(SELECT * FROM (%s) AS u ORDER BY ts DESC, uuid DESC LIMIT $2) AS e',
                       replace(v_parts, 'ts >= $1', 'ts >= $1 AND ts < $1 + interval ''1 s'''))
          INTO v_bn, v_btotal, v_bmin, v_bmax, v_first USING v_from, v_rows - v_n;
        IF v_n + v_bn = 0 THEN
            RETURN;
        END IF;
        IF v_bn = 0 THEN  -- fewer events than p_size: all of them, from the oldest
            EXECUTE format('SELECT min(ts) FROM (%s) AS u',
                           replace(replace(v_parts, ' DESC', ''), 'LIMIT $2', 'LIMIT 1'))
              INTO v_first USING v_from;
        END IF;
        EXECUTE format('SELECT max(ts) FROM (%s) AS u', replace(v_parts, 'LIMIT $2', 'LIMIT 1'))
          INTO v_last USING v_from;
        v_n := v_n + v_bn;
        v_total := coalesce(v_total, 0) + coalesce(v_btotal, 0);
        RETURN QUERY SELECT 1, v_first, v_last, v_n, v_total, least(v_min, v_bmin),
                            greatest(v_max, v_bmax), (v_total / v_n)::double precision;
        RETURN;
    END IF;
    RETURN QUERY EXECUTE format(
    'WITH newest AS (
        SELECT e.ts, e.val, row_number() OVER () AS rn  -- numbered as merged: newest first
          FROM (SELECT * FROM (%s) AS u ORDER BY ts DESC, uuid DESC LIMIT $2) AS e
    )
    SELECT w.k + 1, min(e.ts), max(e.ts), count(*), sum(e.val)::numeric, min(e.val), max(e.val),
           avg(e.val)::double precision
      FROM newest e
     CROSS JOIN LATERAL %s AS w(k)
     WHERE w.k * $4 + $3 <= $2
     GROUP BY w.k
     ORDER BY w.k', v_parts,
        CASE WHEN v_adv = p_size THEN '(SELECT ((e.rn - 1) / $3)::integer)'  -- tumbling: one each
             ELSE 'generate_series(greatest((e.rn - $3 + $4 - 1) / $4, 0)::integer,
                                   ((e.rn - 1) / $4)::integer)' END)
    USING v_from, v_rows, p_size, v_adv;
END
$$;
