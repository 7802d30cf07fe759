-- slidewin.retention_settings_check(): BEFORE INSERT OR UPDATE trigger of
-- slidewin.retention_settings -- refuse a policy's history over 100 years
-- (slidewin.check_duration), whoever writes it (`slidewin jobs add retention`, the client, psql):
-- the ingest's expired horizon and every cutoff is a time minus it. A history_s beyond what an
-- interval's microseconds hold (about 9.2e12 s) is shown as 1e12 s, still over the limit.
CREATE OR REPLACE FUNCTION slidewin.retention_settings_check()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF NEW.history_s IS NOT NULL THEN
        PERFORM slidewin.check_duration('history',
                                        make_interval(secs => least(NEW.history_s, 1e12)));
    END IF;
    RETURN NEW;
END
$$;
CREATE OR REPLACE TRIGGER retention_settings_check
    BEFORE INSERT OR UPDATE OF history_s ON slidewin.retention_settings
    FOR EACH ROW EXECUTE FUNCTION slidewin.retention_settings_check();
