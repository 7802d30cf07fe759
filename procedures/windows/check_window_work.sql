-- slidewin.check_window_work(p_what, p_size, p_advance, p_windows, p_grains, p_fix): refuse,
-- before any row is read, a window request whose work (slidewin.window_work) is above
-- slidewin.window_work_limit(), in one line naming what would be read and returned, with the fix:
--   p_fix 'range': a shorter range -- the most windows that fit, as --limit N -- or a larger
--                  advance (time series: hopping, tumbling, sliding);
--   p_fix 'rows':  fewer rows -- as many as N windows need, --limit N -- or a larger advance
--                  (count windows);
--   p_fix 'advance': a larger advance (the windows holding one time).
CREATE OR REPLACE FUNCTION slidewin.check_window_work(
    p_what text, p_size bigint, p_advance bigint, p_windows bigint, p_grains integer[],
    p_fix text DEFAULT 'range')
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_limit bigint := slidewin.window_work_limit();
    v_work  bigint := slidewin.window_work(p_size, p_advance, p_windows, p_grains);
    v_lo    bigint := 0;
    v_hi    bigint := p_windows;
    v_mid   bigint;
    v_hint  text;
BEGIN
    IF v_work <= v_limit THEN
        RETURN;
    END IF;
    WHILE v_lo < v_hi LOOP  -- the most windows whose work fits
        v_mid := (v_lo + v_hi + 1) / 2;
        IF slidewin.window_work(p_size, p_advance, v_mid, p_grains) <= v_limit THEN
            v_lo := v_mid;
        ELSE
            v_hi := v_mid - 1;
        END IF;
    END LOOP;
    v_hint := CASE p_fix
        WHEN 'rows' THEN format('use at most %s rows (--limit %s windows) or a larger advance',
                                p_size + (greatest(v_lo, 1) - 1) * p_advance, greatest(v_lo, 1))
        WHEN 'advance' THEN 'use a larger advance (fewer windows hold one time)'
        ELSE format('ask for a shorter range: at most %s windows, %ss (--limit %s), or use a '
                    'larger advance', v_lo, v_lo * p_advance, v_lo) END;
    RAISE EXCEPTION '% would read about % % and return % windows: more work than the limit '
                    'of % (slidewin.max_window_work)',
                    p_what, v_work - p_windows,
                    CASE WHEN p_fix = 'rows' THEN 'events' ELSE 'buckets' END, p_windows, v_limit
        USING ERRCODE = 'invalid_parameter_value', HINT = v_hint;
END
$$;
