-- slidewin.stream_check_retention(): BEFORE INSERT OR UPDATE OF history, grace, is_table,
-- max_rows trigger of slidewin.streams -- refuse, whoever writes the row (stream_define, `slidewin streams alter`, a
-- psql UPDATE), a history or grace out of bounds (slidewin.check_duration: history more than 0,
-- grace 0 or more, each at most 100 years) and a history shorter than grace plus the smallest
-- window, 1 s (KIP-428: retention >= size + grace; a shorter history refuses every window of the
-- stream). A table (is_table) has no history at all: it keeps every version, so a history given
-- to it is refused, naming the fix; whether a stream is a table is fixed at its definition. An
-- update that leaves all three as they were passes, so a row stored before these rules can still
-- have its other columns changed. A row limit (max_rows) is 1 or more, and only a declared
-- stream that is not a table has one: a table keeps every version, and the built-in stream's
-- row limit is its retention policy's (`slidewin jobs add retention --max-rows`).
CREATE OR REPLACE FUNCTION slidewin.stream_check_retention()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.history IS NOT DISTINCT FROM OLD.history
            AND NEW.grace IS NOT DISTINCT FROM OLD.grace
            AND NEW.is_table IS NOT DISTINCT FROM OLD.is_table
            AND NEW.max_rows IS NOT DISTINCT FROM OLD.max_rows THEN
        RETURN NEW;
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.is_table IS DISTINCT FROM OLD.is_table THEN
        RAISE EXCEPTION 'stream % is %: that is fixed when it is declared', NEW.name,
                        CASE WHEN OLD.is_table THEN 'a table' ELSE 'not a table' END
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'declare a new stream (slidewin streams add NAME ... --table) and load it';
    END IF;
    IF NEW.is_table AND NEW.history IS NOT NULL THEN
        RAISE EXCEPTION 'history % of stream %: a table keeps every version, with no retention',
                        slidewin.duration_text(NEW.history), NEW.name
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'leave the history unset (leave out --history, or --history forever)';
    END IF;
    IF NEW.max_rows IS NOT NULL THEN
        IF NEW.max_rows < 1 THEN
            RAISE EXCEPTION 'max_rows of stream % must be 1 or more, got %', NEW.name,
                            NEW.max_rows
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'a row limit of 0 would empty the stream; give the rows to keep '
                             '(--max-rows 1M), or none for no row limit';
        ELSIF NEW.is_table THEN
            RAISE EXCEPTION 'max_rows % of stream %: a table keeps every version, with no '
                            'retention', NEW.max_rows, NEW.name
                USING ERRCODE = 'invalid_parameter_value', HINT = 'leave out --max-rows';
        ELSIF NEW.builtin THEN
            RAISE EXCEPTION 'max_rows of stream %: its row limit is its retention policy''s',
                            NEW.name
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'slidewin jobs add retention --max-rows N';
        END IF;
    END IF;
    PERFORM slidewin.check_duration('history', NEW.history, false);
    IF NEW.grace IS NULL THEN
        RAISE EXCEPTION 'grace of stream % is missing', NEW.name
            USING ERRCODE = 'invalid_parameter_value', HINT = 'give --grace 0s or more';
    END IF;
    PERFORM slidewin.check_duration('grace', NEW.grace);
    IF NEW.history < NEW.grace + interval '1 second' THEN
        RAISE EXCEPTION 'history % of stream % is shorter than its grace % plus the smallest '
                        'window (1s): every window of it would be refused',
                        slidewin.duration_text(NEW.history), NEW.name,
                        slidewin.duration_text(NEW.grace)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('keep --history at %s or more, or give a shorter --grace',
                                slidewin.duration_text(NEW.grace + interval '1 second'));
    END IF;
    RETURN NEW;
END
$$;
CREATE OR REPLACE TRIGGER stream_check_retention
    BEFORE INSERT OR UPDATE OF history, grace, is_table, max_rows ON slidewin.streams
    FOR EACH ROW EXECUTE FUNCTION slidewin.stream_check_retention();
