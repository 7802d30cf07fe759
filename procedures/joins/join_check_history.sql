-- slidewin.join_check_history(): BEFORE UPDATE trigger of slidewin.streams -- refuse a history
-- shorter than a join of the stream needs (before + after + grace, Kafka KIP-633), whoever
-- changes it (slidewin streams alter or a psql UPDATE), naming the join and the fix.
CREATE OR REPLACE FUNCTION slidewin.join_check_history()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_j slidewin.joins;
BEGIN
    IF NEW.history IS NULL OR NEW.history IS NOT DISTINCT FROM OLD.history THEN
        RETURN NEW;
    END IF;
    FOR v_j IN SELECT * FROM slidewin.joins WHERE NEW.name IN (left_stream, right_stream)
                ORDER BY name LOOP
        IF NEW.history < v_j.before + v_j.after + v_j.grace THEN
            RAISE EXCEPTION 'history % of stream % is shorter than join % needs (before + after '
                            '+ grace = %)', slidewin.duration_text(NEW.history), NEW.name,
                            v_j.name, slidewin.duration_text(v_j.before + v_j.after + v_j.grace)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = format('keep --history at %s or more, or drop the join first '
                                    '(slidewin joins drop %s --yes)',
                                    slidewin.duration_text(v_j.before + v_j.after + v_j.grace),
                                    v_j.name);
        END IF;
    END LOOP;
    RETURN NEW;
END
$$;
CREATE OR REPLACE TRIGGER join_check_history BEFORE UPDATE OF history ON slidewin.streams
    FOR EACH ROW EXECUTE FUNCTION slidewin.join_check_history();
