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
-- Many windows cost rows + windows, never rows x size / advance: the events are numbered newest
-- first and cut into blocks of p_size; each row carries the running sum and the running min and
-- max of its block forwards and backwards, so a window -- the tail of one block and the head of
-- the next (van Herk / Gil-Werman) -- is its first and last row's (slidewin.stream_hopping_series
-- explains the idea). The work is bounded before anything is read
-- (slidewin.check_window_work).
--
-- p_key: the windows of that key's newest p_rows events alone (as slidewin.stream_count_windows
-- for a declared stream), in the same order. The rollups hold every key, so each partition reads
-- its own rows of the key, newest first, along the key index (slidewin.key_index): that key's
-- newest p_rows rows and no others. Without the index a key's newest rows could only be found
-- by reading every partition newest first -- the whole table for a key with fewer rows -- so
-- a key is refused until the index is on.
-- the signature before p_key: dropped, so that a call is never ambiguous between the two
DROP FUNCTION IF EXISTS slidewin.count_windows(integer, integer, integer);
CREATE OR REPLACE FUNCTION slidewin.count_windows(
    p_size integer, p_advance integer DEFAULT NULL, p_rows integer DEFAULT NULL,
    p_key text DEFAULT NULL)
RETURNS TABLE (window_no integer, window_start timestamptz, window_end timestamptz, n bigint,
               total numeric, vmin bigint, vmax bigint, avg double precision)
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0  -- sub-millisecond work: starting workers costs more
SET jit = off
SET work_mem = '64MB'  -- the sorts of up to a million events stay in memory
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
    v_msg   text;
BEGIN
    PERFORM slidewin.check_count_windows(p_size, v_adv, v_rows);
    IF p_key IS NOT NULL THEN
        PERFORM slidewin.check_key(p_key);
        PERFORM slidewin.check_key_index('events');
    END IF;
    IF v_rows > p_size THEN  -- one window reads the rollups and one second's events
        PERFORM slidewin.check_window_work(
            format('count windows of %s events every %s over the newest %s', p_size, v_adv,
                   v_rows),
            p_size, v_adv, (v_rows - p_size) / v_adv + 1, ARRAY[1], 'rows');
    END IF;
    IF p_key IS NULL THEN  -- the rollups count every key: of no use for one
        SELECT c.sec INTO v_from
          FROM (SELECT s.sec, sum(s.n) OVER (ORDER BY s.sec DESC) AS upto
                  FROM (SELECT r.sec, sum(r.n) AS n FROM slidewin.rollups r
                         GROUP BY r.sec ORDER BY r.sec DESC) AS s) AS c
         WHERE c.upto >= v_rows
         LIMIT 1;
    END IF;
    v_from := coalesce(v_from, '-infinity');
    -- Each partition's primary key (part, ts, uuid) read backwards from that second, merged in
    -- (ts, uuid) order: no sort of the rows, and EXECUTE plans with the actual second.
    -- With a key, its rows alone ($5): along the key index (uuid, ts) when it is there.
    SELECT string_agg(format('(SELECT ts, uuid, val FROM slidewin.%I WHERE part = %s AND ts >= $1 '
                             '%sORDER BY ts DESC, uuid DESC LIMIT $2)',
                             slidewin.partition_name(k), k,
                             CASE WHEN p_key IS NULL THEN '' ELSE 'AND uuid = $5 ' END),
                      ' UNION ALL ')
      INTO v_parts FROM slidewin.partition_keys() AS k;
    IF v_rows = p_size AND p_key IS NULL THEN
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
    IF v_adv = p_size THEN  -- tumbling: each row in exactly one window
        RETURN QUERY EXECUTE format(
        'WITH newest AS (
            SELECT e.ts, e.val, row_number() OVER () AS rn  -- numbered as merged: newest first
              FROM (SELECT * FROM (%s) AS u ORDER BY ts DESC, uuid DESC LIMIT $2) AS e
        )
        SELECT w.k + 1, min(e.ts), max(e.ts), count(*), sum(e.val)::numeric, min(e.val),
               max(e.val), avg(e.val)::double precision
          FROM newest e
         CROSS JOIN LATERAL (SELECT ((e.rn - 1) / $3)::integer) AS w(k)
         WHERE w.k * $4 + $3 <= $2
         GROUP BY w.k
         ORDER BY w.k', v_parts)
        USING v_from, v_rows, p_size, v_adv, p_key;
        RETURN;
    END IF;
    -- rn: 1 = the newest; window k (from 0) holds rn k * advance + 1 .. k * advance + size (or
    -- the last row, when fewer events are stored), blocks of size rows from rn 1
    RETURN QUERY EXECUTE format(
    'WITH newest AS (
        SELECT e.ts, e.val, row_number() OVER () AS rn  -- numbered as merged: newest first
          FROM (SELECT * FROM (%s) AS u ORDER BY ts DESC, uuid DESC LIMIT $2) AS e
    ), h AS (
        SELECT e.*, (e.rn - 1) / $3 AS blk, sum(e.val) OVER run AS p,
               min(e.val) OVER head AS hmin, max(e.val) OVER head AS hmax
          FROM newest e
        WINDOW run AS (ORDER BY (e.rn - 1) / $3, e.rn ROWS UNBOUNDED PRECEDING),
               head AS (PARTITION BY (e.rn - 1) / $3 ORDER BY e.rn ROWS UNBOUNDED PRECEDING)
    ), t AS (
        SELECT h.*, min(h.val) OVER tail AS tmin, max(h.val) OVER tail AS tmax
          FROM h WINDOW tail AS (PARTITION BY h.blk ORDER BY h.rn DESC ROWS UNBOUNDED PRECEDING)
    ), w AS (
        SELECT k.k, k.k * $4 + 1 AS first_rn,
               least(k.k * $4 + $3, (SELECT count(*) FROM newest)) AS last_rn
          FROM generate_series(0, ($2 - $3) / $4) AS k(k)
    )
    SELECT (w.k + 1)::integer, l.ts, f.ts, l.rn - f.rn + 1, l.p - f.p + f.val,
           CASE WHEN l.blk = f.blk THEN f.tmin ELSE least(f.tmin, l.hmin) END,
           CASE WHEN l.blk = f.blk THEN f.tmax ELSE greatest(f.tmax, l.hmax) END,
           ((l.p - f.p + f.val) / (l.rn - f.rn + 1))::double precision
      FROM w
      JOIN t AS f ON f.rn = w.first_rn
      JOIN t AS l ON l.rn = w.last_rn
     ORDER BY w.k', v_parts)
    USING v_from, v_rows, p_size, v_adv, p_key;
EXCEPTION WHEN query_canceled THEN  -- statement_timeout: said in words
    GET STACKED DIAGNOSTICS v_msg = MESSAGE_TEXT;
    PERFORM slidewin.window_timed_out('slidewin.count_windows', v_msg);
    RAISE;
END
$$;
