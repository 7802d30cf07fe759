-- slidewin.attach_session_trigger(p_table): put the session trigger on one table (the parent
-- or a partition: statement triggers with transition tables fire only for the table a
-- statement names, so each carries it, as each carries the rollup triggers). Idempotent.
CREATE OR REPLACE FUNCTION slidewin.attach_session_trigger(p_table regclass)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    EXECUTE format('CREATE OR REPLACE TRIGGER sessions_ins AFTER INSERT ON %s '
                   'REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT '
                   'EXECUTE FUNCTION slidewin.sessions_on_insert()', p_table);
END
$$;
