-- slidewin.stream_count_windows(stream, measure, size, advance, rows, key): count windows over
-- the newest `rows` events of a declared stream (of one key with p_key) in (time, key) order,
-- newest first, as slidewin.count_windows for the built-in stream: window 1 holds the newest
-- `size` events, window k starts (k - 1) * advance events further back; only whole windows.
-- Columns: window_no, its oldest and newest event time, rows n, values cnt, total, min, max,
-- avg (as slidewin.stream_hopping's). Reads the newest `rows` rows through the time index (the
-- key's primary-key range with p_key), never the table.
CREATE OR REPLACE FUNCTION slidewin.stream_count_windows(
    p_stream text, p_measure text, p_size integer, p_advance integer DEFAULT NULL,
    p_rows integer DEFAULT NULL, p_key text DEFAULT NULL)
RETURNS TABLE (window_no integer, window_start timestamptz, window_end timestamptz, n bigint,
               cnt bigint, total numeric, vmin numeric, vmax numeric, avg double precision)
LANGUAGE plpgsql STABLE
SET extra_float_digits = 1  -- a double's text is its shortest round-trip form
SET max_parallel_workers_per_gather = 0
AS $$
DECLARE
    v_s    slidewin.streams := slidewin.stream_get(p_stream);
    v_m    record := slidewin.stream_measure(p_stream, p_measure);
    v_adv  integer := coalesce(p_advance, p_size);
    v_rows integer := coalesce(p_rows, p_size);
    v_num  text := CASE WHEN v_m.type = 'double precision' THEN 'v::text::numeric'
                        ELSE 'v::numeric' END;
    v_key  text;
BEGIN
    PERFORM slidewin.check_count_windows(p_size, v_adv, v_rows);
    v_key := CASE WHEN p_key IS NULL THEN '' ELSE format('WHERE %I = $2::%s', v_s.key_column,
        (SELECT c->>'type' FROM jsonb_array_elements(v_s.columns) c
          WHERE c->>'name' = v_s.key_column)) END;
    RETURN QUERY EXECUTE format(
        'WITH e AS (SELECT t, v, row_number() OVER (ORDER BY t DESC, k DESC) AS rn FROM '
        '  (SELECT %1$I AS t, %2$I AS k, %3$I AS v FROM slidewin_streams.%4$I %5$s '
        '    ORDER BY %1$I DESC, %2$I DESC LIMIT $1) AS newest), '
        'w AS (SELECT g AS no FROM generate_series(1, ((SELECT count(*) FROM e)::integer - $3) '
        '      / $4 + 1) AS g) '
        'SELECT w.no::integer, min(e.t), max(e.t), count(*)::bigint, count(e.v)::bigint, '
        '  CASE WHEN count(e.v) > 0 THEN slidewin.stream_total(coalesce(sum(%6$s) FILTER '
        '    (WHERE e.v::text NOT IN (''NaN'', ''Infinity'', ''-Infinity'')), 0), '
        '    count(*) FILTER (WHERE e.v::text = ''NaN''), '
        '    count(*) FILTER (WHERE e.v::text = ''Infinity''), '
        '    count(*) FILTER (WHERE e.v::text = ''-Infinity'')) END, '
        '  min(e.v) FILTER (WHERE e.v::text <> ''NaN'')::text::numeric, '
        '  max(e.v) FILTER (WHERE e.v::text <> ''NaN'')::text::numeric, '
        '  (CASE WHEN count(e.v) > 0 THEN slidewin.stream_total(coalesce(sum(%6$s) FILTER '
        '    (WHERE e.v::text NOT IN (''NaN'', ''Infinity'', ''-Infinity'')), 0), '
        '    count(*) FILTER (WHERE e.v::text = ''NaN''), '
        '    count(*) FILTER (WHERE e.v::text = ''Infinity''), '
        '    count(*) FILTER (WHERE e.v::text = ''-Infinity'')) END '
        '   / nullif(count(e.v), 0))::double precision '
        'FROM w JOIN e ON e.rn > (w.no - 1) * $4 AND e.rn <= (w.no - 1) * $4 + $3 '
        'GROUP BY w.no ORDER BY w.no',
        v_s.time_column, v_s.key_column, v_m.measure, p_stream, v_key, v_num)
    USING v_rows, p_key, p_size, v_adv;
END
$$;
