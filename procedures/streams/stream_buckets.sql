-- slidewin.stream_buckets(stream, measure, step, from, to, key): one measure of a declared
-- stream summed into buckets of `step` seconds (aligned to the epoch) over [from, to): rows n,
-- values cnt, the exact sum of the finite values, min, max (as numeric: a double's shortest
-- round-trip decimal, which casts back to the same double) and the NaN/+Inf/-Inf counts.
-- Without a key: from the rollups, reading the seconds asked for, never the table. With p_key:
-- the buckets of that key alone, from its own raw rows: the range's rows of the one partition
-- holding the key (its primary key (time, key)), the key's kept.
CREATE OR REPLACE FUNCTION slidewin.stream_buckets(
    p_stream text, p_measure text, p_step integer, p_from timestamptz, p_to timestamptz,
    p_key text DEFAULT NULL)
RETURNS TABLE (bucket timestamptz, n bigint, cnt bigint, total numeric, vmin numeric,
               vmax numeric, nan bigint, pinf bigint, ninf bigint)
LANGUAGE plpgsql STABLE
SET extra_float_digits = 1  -- a double's text is its shortest round-trip form
AS $$
DECLARE
    v_m    record := slidewin.stream_measure(p_stream, p_measure);
    v_dbl  boolean := v_m.type = 'double precision';
    v_cast text := CASE WHEN v_dbl THEN '::text::numeric' ELSE '::numeric' END;
    v_odd  text := CASE WHEN v_dbl
                        THEN format('sum(%I)::bigint, sum(%I)::bigint, sum(%I)::bigint',
                                    v_m.measure || '_nan', v_m.measure || '_pinf',
                                    v_m.measure || '_ninf')
                        ELSE '0::bigint, 0::bigint, 0::bigint' END;
    v_s    slidewin.streams;
    v_aggs text;
BEGIN
    IF p_key IS NULL THEN
        RETURN QUERY EXECUTE format(
            'SELECT slidewin.grain_floor(sec, $1), sum(n)::bigint, sum(%1$I)::bigint, sum(%2$I), '
            'min(%3$I)%5$s, max(%4$I)%5$s, %6$s FROM slidewin_rollups.%7$I '
            'WHERE sec >= $2 AND sec < $3 GROUP BY 1 ORDER BY 1',
            v_m.measure || '_n', v_m.measure || '_sum', v_m.measure || '_min',
            v_m.measure || '_max', v_cast, v_odd, p_stream)
        USING p_step, p_from, p_to;
        RETURN;
    END IF;
    v_s := slidewin.stream_get(p_stream);
    IF v_dbl THEN
        v_aggs := format(
            'coalesce(sum(%1$I::text::numeric) FILTER (WHERE %1$I NOT IN (%2$L, %3$L, %4$L)), 0), '
            'min(%1$I) FILTER (WHERE %1$I <> %2$L)::text::numeric, '
            'max(%1$I) FILTER (WHERE %1$I <> %2$L)::text::numeric, '
            'count(*) FILTER (WHERE %1$I = %2$L), count(*) FILTER (WHERE %1$I = %3$L), '
            'count(*) FILTER (WHERE %1$I = %4$L)',
            v_m.measure, 'NaN', 'Infinity', '-Infinity');
    ELSE
        v_aggs := format('coalesce(sum(%1$I::numeric), 0), min(%1$I)::numeric, '
                         'max(%1$I)::numeric, 0::bigint, 0::bigint, 0::bigint', v_m.measure);
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT slidewin.grain_floor(%1$I, $1), count(*)::bigint, count(%2$I)::bigint, %3$s '
        'FROM slidewin_streams.%4$I WHERE %5$I = $4::%6$s AND %1$I >= $2 AND %1$I < $3 '
        'GROUP BY 1 ORDER BY 1',
        v_s.time_column, v_m.measure, v_aggs, p_stream, v_s.key_column,
        (SELECT c->>'type' FROM jsonb_array_elements(v_s.columns) c
          WHERE c->>'name' = v_s.key_column))
    USING p_step, p_from, p_to, p_key;
END
$$;
