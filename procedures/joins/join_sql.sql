-- slidewin.join_sql(name): generate, once per definition, the statements a join runs and store
-- them on its registry row (so that the trigger and slidewin.join_advance never rebuild them):
--   pair_left_sql / pair_right_sql  ($1: W before the batch; $2, $3: the other side's time range
--       the new rows can match) the new rows of one side (the trigger's transition table
--       new_rows) hashed against the other side's stored rows in that range on the on-column
--       and a time bin (v_bin below), read through its time index -- a cost that follows the
--       batch and its window, never the table -- leaving out records late for the join;
--   late_left_sql / late_right_sql  ($1: W) the new rows older than W, recorded as late;
--   final_left_sql / final_right_sql  ($1, $2: a range of record times) the outer rows that became
--       final: records in the range, not late, with no pair among the results whose ts can hold
--       one (a pair's ts is within after -- right: before -- of the record's time);
--   show_sql  ($1, $2: a time range) seq, ts, emitted_at, l, r (jsonb) of the join's answers.
-- Results are written in ts order: the ts index then takes them near its right edge, in pages
-- it has just written, not at random places across the batch's window (measured: about a tenth
-- of a result's cost in the database, the sort included).
-- An asof join has show_sql alone, and late_right_sql too when its right stream is a table.
-- Every identifier goes through format('%I').
CREATE OR REPLACE FUNCTION slidewin.join_sql(p_name text)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_j   slidewin.joins := slidewin.join_get(p_name);
    v_l   slidewin.streams := slidewin.stream_row(v_j.left_stream);
    v_r   slidewin.streams := slidewin.stream_row(v_j.right_stream);
    v_res text := format('slidewin_joins.%I', v_j.name);
    v_late text := format('slidewin_joins.%I', v_j.name || '#late');
    v_ltab text := slidewin.stream_table(v_j.left_stream);
    v_rtab text := slidewin.stream_table(v_j.right_stream);
    v_self text := '';
    -- before a time range of each side: read through its time index (events: every partition)
    v_lidx text := slidewin.stream_time_prefix(v_j.left_stream, 'l');
    v_ridx text := slidewin.stream_time_prefix(v_j.right_stream, 'r');
    v_lt  text := quote_ident(v_l.time_column);
    v_rt  text := quote_ident(v_r.time_column);
    v_lk  text := quote_ident(v_l.key_column);
    v_rk  text := quote_ident(v_r.key_column);
    v_lon text := quote_ident(v_j.left_on);
    v_ron text := quote_ident(v_j.right_on);
    v_ltarget text;
    v_rtarget text;
    v_ljson text;
    v_rjson text;
    v_before text := quote_literal(v_j.before) || '::interval';
    v_after  text := quote_literal(v_j.after) || '::interval';
    v_kind text := CASE v_j.join_type WHEN 'left' THEN 'LEFT JOIN' ELSE 'JOIN' END;
    -- the pairs' hash join is keyed on the on-column and a time bin as wide as the window (a
    -- tenth and a second more, so that months and days of any length fit): a stored record is
    -- in one bin, a new one's window touches at most two, so a key's records in other bins are
    -- never compared (keyed on the on-column alone, each new record met every stored record of
    -- its key in the batch's time range: about 30 per pair in `bench joins`)
    v_width interval := make_interval(secs => extract(epoch FROM v_j.before + v_j.after) * 1.1
                                              + 1);
    v_bin  text := 'date_bin(' || quote_literal(v_width) || '::interval, %s, '
                   '''epoch''::timestamptz)';
    v_new  text;
BEGIN
    -- the new rows (%1$s: their time column), each once per bin its window [time - %2$s,
    -- time + %3$s] touches, those older than W ($1) left out
    v_new := format('(SELECT n.*, b."#bin" FROM new_rows n CROSS JOIN LATERAL (VALUES (%1$s), '
                    '(%1$s + %2$L::interval)) b ("#bin") WHERE b."#bin" <= n.%%1$s + %%3$s '
                    'AND ($1::timestamptz IS NULL OR n.%%1$s >= $1) OFFSET 0) n',
                    format(v_bin, 'n.%1$s - %2$s'), v_width);

    SELECT string_agg(format('%I', 'l_' || c), ', '),
           'jsonb_build_object(' || string_agg(format('%L, %%1$s.%I', c, c), ', ') || ')'
      INTO v_ltarget, v_ljson FROM unnest(v_j.select_left) c;
    SELECT string_agg(format('%I', 'r_' || c), ', '),
           'jsonb_build_object(' || string_agg(format('%L, %%1$s.%I', c, c), ', ') || ')'
      INTO v_rtarget, v_rjson FROM unnest(v_j.select_right) c;
    IF v_j.left_stream = v_j.right_stream THEN
        -- a self-join: the trigger runs both statements on one batch; pairs of two new rows are
        -- pair_left_sql's (new x stored, the batch included), so pair_right_sql pairs the new
        -- rows only with the rows stored before the batch -- each ordered pair once
        v_self := format(' AND NOT EXISTS (SELECT 1 FROM new_rows m WHERE m.%s = l.%s '
                         'AND m.%s = l.%s)', v_lt, v_lt, v_lk, v_lk);
    END IF;
    IF v_j.kind = 'interval' THEN
        UPDATE slidewin.joins SET
            pair_left_sql = format(
                'INSERT INTO %s (ts, %s, %s) SELECT greatest(n.%s, r.%s), %s, %s '
                'FROM %s JOIN (SELECT r.*, %s AS "#bin" FROM %s r '
                'WHERE %sr.%s >= $2 AND r.%s <= $3 AND NOT EXISTS (SELECT 1 FROM %s x '
                'WHERE x.side = ''r'' AND x.ts = r.%s AND x.key = r.%s::text)) r '
                'ON r.%s = n.%s AND r."#bin" = n."#bin" AND r.%s BETWEEN n.%s - %s AND n.%s + %s '
                'ORDER BY 1',
                v_res, v_ltarget, v_rtarget, v_lt, v_rt,
                (SELECT string_agg(format('n.%I', c), ', ') FROM unnest(v_j.select_left) c),
                (SELECT string_agg(format('r.%I', c), ', ') FROM unnest(v_j.select_right) c),
                format(v_new, v_lt, v_before, v_after), format(v_bin, 'r.' || v_rt), v_rtab,
                v_ridx, v_rt, v_rt, v_late, v_rt, v_rk,
                v_ron, v_lon, v_rt, v_lt, v_before, v_lt, v_after),
            pair_right_sql = format(
                'INSERT INTO %s (ts, %s, %s) SELECT greatest(l.%s, n.%s), %s, %s '
                'FROM %s JOIN (SELECT l.*, %s AS "#bin" FROM %s l '
                'WHERE %sl.%s >= $2 AND l.%s <= $3 AND NOT EXISTS (SELECT 1 FROM %s x '
                'WHERE x.side = ''l'' AND x.ts = l.%s AND x.key = l.%s::text)) l '
                'ON l.%s = n.%s AND l."#bin" = n."#bin" AND l.%s BETWEEN n.%s - %s AND n.%s + %s '
                'WHERE true%s ORDER BY 1',
                v_res, v_ltarget, v_rtarget, v_lt, v_rt,
                (SELECT string_agg(format('l.%I', c), ', ') FROM unnest(v_j.select_left) c),
                (SELECT string_agg(format('n.%I', c), ', ') FROM unnest(v_j.select_right) c),
                format(v_new, v_rt, v_after, v_before), format(v_bin, 'l.' || v_lt), v_ltab,
                v_lidx, v_lt, v_lt, v_late, v_lt, v_lk,
                v_lon, v_ron, v_lt, v_rt, v_after, v_rt, v_before, v_self),
            late_left_sql = format(
                'INSERT INTO %s (side, ts, key) SELECT ''l'', n.%s, n.%s::text FROM new_rows n '
                'WHERE n.%s < $1 ON CONFLICT DO NOTHING', v_late, v_lt, v_lk, v_lt),
            late_right_sql = format(
                'INSERT INTO %s (side, ts, key) SELECT ''r'', n.%s, n.%s::text FROM new_rows n '
                'WHERE n.%s < $1 ON CONFLICT DO NOTHING', v_late, v_rt, v_rk, v_rt),
            final_left_sql = format(
                'INSERT INTO %s (ts, %s) SELECT l.%s, %s FROM %s l '
                'WHERE %sl.%s >= $1 AND l.%s < $2 AND NOT EXISTS (SELECT 1 FROM %s j '
                'WHERE j.ts >= $1 AND j.ts < $2 + %s AND j.%I = l.%s AND j.%I = l.%s) '
                'AND NOT EXISTS (SELECT 1 FROM %s x '
                'WHERE x.side = ''l'' AND x.ts = l.%s AND x.key = l.%s::text) ORDER BY 1',
                v_res, v_ltarget, v_lt,
                (SELECT string_agg(format('l.%I', c), ', ') FROM unnest(v_j.select_left) c),
                v_ltab, v_lidx, v_lt, v_lt, v_res, v_after, 'l_' || v_l.time_column, v_lt,
                'l_' || v_l.key_column, v_lk, v_late, v_lt, v_lk),
            final_right_sql = format(
                'INSERT INTO %s (ts, %s) SELECT r.%s, %s FROM %s r '
                'WHERE %sr.%s >= $1 AND r.%s < $2 AND NOT EXISTS (SELECT 1 FROM %s j '
                'WHERE j.ts >= $1 AND j.ts < $2 + %s AND j.%I = r.%s AND j.%I = r.%s) '
                'AND NOT EXISTS (SELECT 1 FROM %s x '
                'WHERE x.side = ''r'' AND x.ts = r.%s AND x.key = r.%s::text) ORDER BY 1',
                v_res, v_rtarget, v_rt,
                (SELECT string_agg(format('r.%I', c), ', ') FROM unnest(v_j.select_right) c),
                v_rtab, v_ridx, v_rt, v_rt, v_res, v_before, 'r_' || v_r.time_column, v_rt,
                'r_' || v_r.key_column, v_rk, v_late, v_rt, v_rk),
            show_sql = format(
                'SELECT j.seq, j.ts, j.emitted_at, CASE WHEN j.%I IS NULL THEN NULL ELSE %s END AS l, '
                'CASE WHEN j.%I IS NULL THEN NULL ELSE %s END AS r FROM %s j '
                'WHERE j.ts >= $1 AND j.ts < $2',
                'l_' || v_l.time_column,
                (SELECT 'jsonb_build_object(' || string_agg(format('%L, j.%I', c, 'l_' || c), ', ')
                        || ')' FROM unnest(v_j.select_left) c),
                'r_' || v_r.time_column,
                (SELECT 'jsonb_build_object(' || string_agg(format('%L, j.%I', c, 'r_' || c), ', ')
                        || ')' FROM unnest(v_j.select_right) c),
                v_res)
        WHERE name = v_j.name;
    ELSIF v_j.kind = 'asof' THEN
        -- the version valid at the left record's time: looked up by that time alone (never by
        -- when it arrived), within the age bound, a version late for the join left out
        UPDATE slidewin.joins SET show_sql = format(
            'SELECT NULL::bigint AS seq, l.%s AS ts, NULL::timestamptz AS emitted_at, %s AS l, '
            'CASE WHEN r.%s IS NULL THEN NULL ELSE %s END AS r FROM %s l '
            '%s LATERAL (SELECT * FROM %s w WHERE w.%s = l.%s AND w.%s <= l.%s%s%s '
            'ORDER BY w.%s DESC, w.%s DESC LIMIT 1) r ON true WHERE %sl.%s >= $1 AND l.%s < $2',
            v_lt, format(v_ljson, 'l'), v_rt, format(v_rjson, 'r'), v_ltab, v_kind, v_rtab,
            v_ron, v_lon, v_rt, v_lt,
            CASE WHEN v_j.within IS NULL THEN ''
                 ELSE format(' AND w.%s >= l.%s - %L::interval', v_rt, v_lt, v_j.within) END,
            CASE WHEN NOT v_j.right_table THEN ''
                 ELSE format(' AND NOT EXISTS (SELECT 1 FROM %s x WHERE x.side = ''r'' '
                             'AND x.ts = w.%s AND x.key = w.%s::text)', v_late, v_rt, v_rk) END,
            v_rt, v_rk, v_lidx, v_lt, v_lt),
            late_right_sql = CASE WHEN v_j.right_table THEN format(
                'INSERT INTO %s (side, ts, key) SELECT ''r'', n.%s, n.%s::text FROM new_rows n '
                'WHERE n.%s < $1 ON CONFLICT DO NOTHING', v_late, v_rt, v_rk, v_rt) END
        WHERE name = v_j.name;
    ELSE
        UPDATE slidewin.joins SET show_sql = format(
            'SELECT NULL::bigint AS seq, l.%s AS ts, NULL::timestamptz AS emitted_at, %s AS l, '
            'CASE WHEN r.%s IS NULL THEN NULL ELSE %s END AS r FROM %s l '
            '%s LATERAL (SELECT * FROM (SELECT * FROM %s w WHERE w.%s <= l.%s '
            'ORDER BY w.%s DESC, w.%s DESC LIMIT %s) w WHERE w.%s = l.%s) r ON true '
            'WHERE %sl.%s >= $1 AND l.%s < $2',
            v_lt, format(v_ljson, 'l'), v_rt, format(v_rjson, 'r'), v_ltab, v_kind, v_rtab,
            v_rt, v_lt, v_rt, v_rk, v_j.n_rows, v_ron, v_lon, v_lidx, v_lt, v_lt)
        WHERE name = v_j.name;
    END IF;
END
$$;
