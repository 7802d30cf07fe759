-- slidewin.stream_rollup_sql(p_name): (re)generate the two statements that keep a declared
-- stream's rollups exact, and store them in slidewin.streams (insert_sql, recompute_sql).
--
-- Per second: n (rows), and per measure m: m_n (non-NULL values), m_sum (exact numeric sum),
-- m_min, m_max; for double precision measures also m_nan, m_pinf, m_ninf, and then m_sum, m_min
-- and m_max cover the other values (m_sum the finite ones only). A double enters m_sum as the
-- exact decimal of its shortest round-trip text (what PostgreSQL prints for it), so sums are
-- exact and order-free: nothing is ever subtracted, and values that cancel sum to exactly 0.
--
-- insert_sql adds the statement's inserted rows (transition table new_rows) to their seconds,
-- and those seconds' sums to their minutes, in one pass over the rows;
-- recompute_sql ($1: the seconds a delete or update touched) aggregates those seconds again from
-- the raw rows, after they were emptied: exact under deletes, min and max included, and bounded
-- by the rows of the seconds touched; minute_recompute_sql ($1: minutes) aggregates minutes again
-- from their (at most 60) second rollups. minute_insert_sql, once a second pass over the rows for
-- the minutes, is NULL (db init regenerates every stream's statements).
CREATE OR REPLACE FUNCTION slidewin.stream_rollup_sql(p_name text)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_s      slidewin.streams;
    v_m      text;
    v_type   text;
    v_cols   text := 'sec, n';
    v_aggs   text := '';
    v_set    text := 'n = r.n + excluded.n';
    v_ts     text;
    v_mins   text := 'sum(n)';  -- the minute grain's aggregates of the second rollups
BEGIN
    SELECT * INTO STRICT v_s FROM slidewin.streams WHERE name = p_name AND NOT builtin;
    v_ts := format('slidewin.grain_floor(%I, 1)', v_s.time_column);  -- inlined: see there
    FOREACH v_m IN ARRAY v_s.measures LOOP
        SELECT c->>'type' INTO v_type FROM jsonb_array_elements(v_s.columns) c
         WHERE c->>'name' = v_m;
        v_cols := v_cols || format(', %I, %I, %I, %I', v_m || '_n', v_m || '_sum',
                                   v_m || '_min', v_m || '_max');
        v_set := v_set || format(
            ', %1$I = r.%1$I + excluded.%1$I, %2$I = r.%2$I + excluded.%2$I'
            ', %3$I = least(r.%3$I, excluded.%3$I), %4$I = greatest(r.%4$I, excluded.%4$I)',
            v_m || '_n', v_m || '_sum', v_m || '_min', v_m || '_max');
        v_mins := v_mins || format(', sum(%I), sum(%I), min(%I), max(%I)', v_m || '_n',
                                   v_m || '_sum', v_m || '_min', v_m || '_max');
        IF v_type = 'double precision' THEN
            v_aggs := v_aggs || format(
                ', count(%1$I), coalesce(sum(%1$I::text::numeric) FILTER (WHERE %1$I NOT IN '
                '(''NaN'', ''Infinity'', ''-Infinity'')), 0), min(%1$I) FILTER (WHERE %1$I <> '
                '''NaN''), max(%1$I) FILTER (WHERE %1$I <> ''NaN''), count(*) FILTER (WHERE %1$I '
                '= ''NaN''), count(*) FILTER (WHERE %1$I = ''Infinity''), count(*) FILTER (WHERE '
                '%1$I = ''-Infinity'')', v_m);
            v_cols := v_cols || format(', %I, %I, %I', v_m || '_nan', v_m || '_pinf',
                                       v_m || '_ninf');
            v_set := v_set || format(
                ', %1$I = r.%1$I + excluded.%1$I, %2$I = r.%2$I + excluded.%2$I'
                ', %3$I = r.%3$I + excluded.%3$I', v_m || '_nan', v_m || '_pinf', v_m || '_ninf');
            v_mins := v_mins || format(', sum(%I), sum(%I), sum(%I)', v_m || '_nan',
                                       v_m || '_pinf', v_m || '_ninf');
        ELSE
            v_aggs := v_aggs || format(
                ', count(%1$I), coalesce(sum(%1$I::numeric), 0), min(%1$I), max(%1$I)', v_m);
        END IF;
    END LOOP;
    UPDATE slidewin.streams SET
        -- one pass over the inserted rows: their seconds, then the minutes summed from those
        insert_sql = format(
            'WITH s (%2$s) AS (SELECT %3$s, count(*)%4$s FROM new_rows GROUP BY 1), '
            'seconds AS (INSERT INTO slidewin_rollups.%1$I AS r (%2$s) SELECT * FROM s '
            'ORDER BY 1 ON CONFLICT (sec) DO UPDATE SET %5$s) '
            'INSERT INTO slidewin_rollups.%6$I AS r (%2$s) SELECT date_trunc(''minute'', '
            'sec, ''UTC''), %7$s FROM s GROUP BY 1 ORDER BY 1 '
            'ON CONFLICT (sec) DO UPDATE SET %5$s',
            p_name, v_cols, v_ts, v_aggs, v_set, p_name || '#minute', v_mins),
        recompute_sql = format(
            'INSERT INTO slidewin_rollups.%1$I (%2$s) SELECT s.sec, count(*)%3$s '
            'FROM unnest($1::timestamptz[]) AS s(sec) JOIN slidewin_streams.%1$I t '
            'ON t.%4$I >= s.sec AND t.%4$I < s.sec + interval ''1 second'' GROUP BY s.sec '
            'ORDER BY s.sec',
            p_name, v_cols, v_aggs, v_s.time_column),
        minute_insert_sql = NULL,
        minute_recompute_sql = format(
            'INSERT INTO slidewin_rollups.%1$I (%2$s) SELECT s.m, %3$s '
            'FROM unnest($1::timestamptz[]) AS s(m) JOIN slidewin_rollups.%4$I r '
            'ON r.sec >= s.m AND r.sec < s.m + interval ''1 minute'' GROUP BY s.m ORDER BY s.m',
            p_name || '#minute', v_cols, v_mins, p_name)
     WHERE name = p_name;
END
$$;
