-- slidewin.check_window_spec(p_size, p_advance): refuse a window definition the store cannot
-- answer exactly, naming the parameter, the value and the fix (Kafka's KIP-428 rules):
--   advance <= size (a larger advance leaves gaps no window covers);
--   size + the ingest's grace <= the default retention policy's history, when it has one (a
--   longer window would lose its oldest seconds to retention before it could be final).
-- These are the built-in stream's windows: its grace is its own stream_state row's (`events`),
-- never another stream's (a declared stream's windows are checked by
-- slidewin.stream_window_state against its own history and grace).
-- Sizes are whole seconds (slidewin.window_seconds).
CREATE OR REPLACE FUNCTION slidewin.check_window_spec(p_size integer, p_advance integer)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_history double precision;
    v_grace   double precision;
BEGIN
    IF p_advance > p_size THEN
        RAISE EXCEPTION 'advance %s is larger than size %s', p_advance, p_size
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('use an advance of at most %ss (equal to size: tumbling windows)',
                                p_size);
    END IF;
    SELECT history_s INTO v_history FROM slidewin.retention_settings WHERE name = 'default';
    SELECT coalesce(extract(epoch FROM max(grace)), 0) INTO v_grace FROM slidewin.stream_state
     WHERE stream = 'events';
    IF v_history IS NOT NULL AND p_size + v_grace > v_history THEN
        RAISE EXCEPTION 'size %s plus the ingest''s grace %s is longer than the retention history %s',
                        p_size, v_grace, v_history
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('use a size of at most %ss, or keep a longer history '
                                '(slidewin jobs add retention --history ...)',
                                greatest(floor(v_history - v_grace), 0));
    END IF;
END
$$;
