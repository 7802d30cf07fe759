-- slidewin.stream_bucket_columns(stream, measure, step): the select list that turns rollup rows
-- r (slidewin.stream_rollups) of one measure into the columns of slidewin.stream_buckets --
-- bucket, n, cnt, total, vmin, vmax (numeric, integer and numeric measures), fmin, fmax (double
-- precision measures), nan, pinf, ninf. p_step NULL: each row as it is; else the rows summed
-- into buckets of p_step seconds aligned to the epoch (the caller adds GROUP BY 1).
CREATE OR REPLACE FUNCTION slidewin.stream_bucket_columns(
    p_stream text, p_measure text, p_step integer)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_m   record := slidewin.stream_measure(p_stream, p_measure);
    v_dbl boolean := v_m.type = 'double precision';
    v_a   text[] := CASE WHEN p_step IS NULL THEN ARRAY['', '', '', '']
                         ELSE ARRAY['sum', 'min', 'max', '::bigint'] END;
BEGIN
    RETURN CASE WHEN p_step IS NULL THEN 'r.sec'
                -- slidewin.grain_floor, inline: a function call per row costs more than the sum
                ELSE format('CASE WHEN r.sec >= ''epoch'' THEN date_bin(''%1$s s'', r.sec, '
                            '''epoch'') ELSE slidewin.grain_floor(r.sec, %1$s) END', p_step) END
        || format(', %1$s(r.n)%4$s, %1$s(r.%5$I)%4$s, %1$s(r.%6$I), ',
                  v_a[1], v_a[2], v_a[3], v_a[4], v_m.measure || '_n', v_m.measure || '_sum')
        || CASE WHEN v_dbl
                THEN format('NULL::numeric, NULL::numeric, %2$s(r.%5$I), %3$s(r.%6$I), '
                            '%1$s(r.%7$I)%4$s, %1$s(r.%8$I)%4$s, %1$s(r.%9$I)%4$s',
                            v_a[1], v_a[2], v_a[3], v_a[4], v_m.measure || '_min',
                            v_m.measure || '_max', v_m.measure || '_nan',
                            v_m.measure || '_pinf', v_m.measure || '_ninf')
                ELSE format('%1$s(r.%3$I)::numeric, %2$s(r.%4$I)::numeric, NULL::float8, '
                            'NULL::float8, 0::bigint, 0::bigint, 0::bigint',
                            v_a[2], v_a[3], v_m.measure || '_min', v_m.measure || '_max') END;
END
$$;
