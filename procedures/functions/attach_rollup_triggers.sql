-- slidewin.attach_rollup_triggers(p_table): put the four rollup triggers on one table.
--
-- Statement-level triggers with transition tables fire only for the table a statement names, so
-- the parent and every partition carry them: an INSERT/COPY/DELETE/UPDATE/TRUNCATE through either
-- keeps slidewin.rollups exact, and none is counted twice.
CREATE OR REPLACE FUNCTION slidewin.attach_rollup_triggers(p_table regclass)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    EXECUTE format('CREATE OR REPLACE TRIGGER rollups_ins AFTER INSERT ON %s '
                   'REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT '
                   'EXECUTE FUNCTION slidewin.rollups_on_insert()', p_table);
    EXECUTE format('CREATE OR REPLACE TRIGGER rollups_del AFTER DELETE ON %s '
                   'REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT '
                   'EXECUTE FUNCTION slidewin.rollups_on_delete()', p_table);
    EXECUTE format('CREATE OR REPLACE TRIGGER rollups_upd AFTER UPDATE ON %s '
                   'REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT '
                   'EXECUTE FUNCTION slidewin.rollups_on_update()', p_table);
    EXECUTE format('CREATE OR REPLACE TRIGGER rollups_trunc AFTER TRUNCATE ON %s '
                   'FOR EACH STATEMENT EXECUTE FUNCTION slidewin.rollups_on_truncate()', p_table);
END
$$;
