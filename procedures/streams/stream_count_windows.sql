-- slidewin.stream_count_windows(stream, measure, size, advance, rows, key): count windows over
-- the newest `rows` events of a declared stream (of one key with p_key) in (time, key) order,
-- newest first, as slidewin.count_windows for the built-in stream: window 1 holds the newest
-- `size` events, window k starts (k - 1) * advance events further back; only windows that fit
-- in `rows`, and a stream (or key) holding fewer events gives shorter windows (n < size).
-- Columns: window_no, its oldest and newest event time, rows n, values cnt, total, min, max,
-- avg (as slidewin.stream_hopping's). Reads the newest `rows` rows through the time index (the
-- key's primary-key range with p_key), never the table; the work is bounded before anything is
-- read (slidewin.check_window_work).
-- Cost: rows + windows, never rows x windows: the rows are numbered newest first and cut into
-- blocks of `size`; each row carries the running counts and exact sums (values, finite sum,
-- NaN, +Inf, -Inf) and its block's running min and max forwards and backwards, so a window --
-- the tail of one block and the head of the next (van Herk / Gil-Werman) -- is computed from its
-- first and last row.
CREATE OR REPLACE FUNCTION slidewin.stream_count_windows(
    p_stream text, p_measure text, p_size integer, p_advance integer DEFAULT NULL,
    p_rows integer DEFAULT NULL, p_key text DEFAULT NULL)
RETURNS TABLE (window_no integer, window_start timestamptz, window_end timestamptz, n bigint,
               cnt bigint, total numeric, vmin numeric, vmax numeric, avg double precision)
LANGUAGE plpgsql STABLE
SET extra_float_digits = 1  -- a double's text is its shortest round-trip form
SET max_parallel_workers_per_gather = 0
SET jit = off
SET work_mem = '64MB'  -- the sorts of up to a million rows stay in memory
AS $$
DECLARE
    v_s    slidewin.streams := slidewin.stream_get(p_stream);
    v_m    record := slidewin.stream_measure(p_stream, p_measure);
    v_adv  integer := coalesce(p_advance, p_size);
    v_rows integer := coalesce(p_rows, p_size);
    v_num  text := CASE WHEN v_m.type = 'double precision' THEN 'v::text::numeric'
                        ELSE 'v::numeric' END;
    v_key  text;
    v_msg   text;
BEGIN
    PERFORM slidewin.check_count_windows(p_size, v_adv, v_rows);
    PERFORM slidewin.check_window_work(
        format('count windows of %s events every %s over the newest %s of stream %s', p_size,
               v_adv, v_rows, p_stream),
        p_size, v_adv, (v_rows - p_size) / v_adv + 1, ARRAY[1], 'rows');
    v_key := CASE WHEN p_key IS NULL THEN '' ELSE format('WHERE %I = $2::%s', v_s.key_column,
        (SELECT c->>'type' FROM jsonb_array_elements(v_s.columns) c
          WHERE c->>'name' = v_s.key_column)) END;
    RETURN QUERY EXECUTE format(
        'WITH e AS (SELECT t, v, v::text AS vt, row_number() OVER (ORDER BY t DESC, k DESC) AS rn '
        '  FROM (SELECT %1$I AS t, %2$I AS k, %3$I AS v FROM slidewin_streams.%4$I %5$s '
        '         ORDER BY %1$I DESC, %2$I DESC LIMIT $1) AS newest), '
        'q AS (SELECT e.rn, e.t, (e.rn - 1) / $3 AS blk, (e.v IS NOT NULL)::integer AS isv, '
        '  CASE WHEN e.vt NOT IN (''NaN'', ''Infinity'', ''-Infinity'') THEN %6$s END AS fin, '
        '  (e.vt = ''NaN'')::integer AS isnan, (e.vt = ''Infinity'')::integer AS ispinf, '
        '  (e.vt = ''-Infinity'')::integer AS isninf, '
        '  CASE WHEN e.vt <> ''NaN'' THEN e.v END AS mv FROM e), '
        'h AS (SELECT q.*, sum(q.isv) OVER run AS pv, sum(q.fin) OVER run AS pfin, '
        '  sum(q.isnan) OVER run AS pnan, sum(q.ispinf) OVER run AS ppinf, '
        '  sum(q.isninf) OVER run AS pninf, '
        '  min(q.mv) OVER head AS hmin, max(q.mv) OVER head AS hmax FROM q '
        '  WINDOW run AS (ORDER BY q.blk, q.rn ROWS UNBOUNDED PRECEDING), '
        '         head AS (PARTITION BY q.blk ORDER BY q.rn ROWS UNBOUNDED PRECEDING)), '
        'r AS (SELECT h.*, min(h.mv) OVER tail AS tmin, max(h.mv) OVER tail AS tmax FROM h '
        '  WINDOW tail AS (PARTITION BY h.blk ORDER BY h.rn DESC ROWS UNBOUNDED PRECEDING)), '
        -- window no covers rn (no - 1) * advance + 1 .. + size, of the rows there are: every
        -- window that fits in `rows` and holds a row (the join on first_rn drops the others)
        'w AS (SELECT g AS no, (g - 1) * $4 + 1 AS first_rn, '
        '  least((g - 1) * $4 + $3, (SELECT count(*) FROM e)) AS last_rn '
        '  FROM generate_series(1, ($1 - $3) / $4 + 1) AS g), '
        'a AS (SELECT w.no, l.t AS t_old, f.t AS t_new, l.rn - f.rn + 1 AS n, '
        '  coalesce(l.pv - f.pv + f.isv, 0) AS cnt, '
        '  coalesce(l.pfin, 0) - coalesce(f.pfin, 0) + coalesce(f.fin, 0) AS fin, '
        '  (coalesce(l.pnan, 0) - coalesce(f.pnan, 0) + coalesce(f.isnan, 0))::bigint AS nan, '
        '  (coalesce(l.ppinf, 0) - coalesce(f.ppinf, 0) + coalesce(f.ispinf, 0))::bigint '
        '    AS pinf, '
        '  (coalesce(l.pninf, 0) - coalesce(f.pninf, 0) + coalesce(f.isninf, 0))::bigint '
        '    AS ninf, '
        '  CASE WHEN l.blk = f.blk THEN f.tmin ELSE least(f.tmin, l.hmin) END AS lo, '
        '  CASE WHEN l.blk = f.blk THEN f.tmax ELSE greatest(f.tmax, l.hmax) END AS hi '
        '  FROM w JOIN r AS f ON f.rn = w.first_rn JOIN r AS l ON l.rn = w.last_rn) '
        'SELECT a.no::integer, a.t_old, a.t_new, a.n::bigint, a.cnt::bigint, '
        '  CASE WHEN a.cnt > 0 THEN slidewin.stream_total(a.fin, a.nan, a.pinf, a.ninf) END, '
        '  a.lo::text::numeric, a.hi::text::numeric, '
        '  (CASE WHEN a.cnt > 0 THEN slidewin.stream_total(a.fin, a.nan, a.pinf, a.ninf) END '
        '   / nullif(a.cnt, 0))::double precision '
        'FROM a ORDER BY a.no',
        v_s.time_column, v_s.key_column, v_m.measure, p_stream, v_key, v_num)
    USING v_rows, p_key, p_size, v_adv;
EXCEPTION WHEN query_canceled THEN  -- statement_timeout: said in words
    GET STACKED DIAGNOSTICS v_msg = MESSAGE_TEXT;
    PERFORM slidewin.window_timed_out('slidewin.stream_count_windows', v_msg);
    RAISE;
END
$$;
