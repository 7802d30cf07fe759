-- slidewin.grant_roles(prefix): give the role set <prefix>_owner, _ingest, _jobs and _reader
-- exactly what each part of slidewin needs on every object the store has now. Idempotent:
-- `slidewin db init` and the functions that create tables (streams, joins) run it again.
--   owner  : owns the schemas and every object in them (so `db init` can replace functions and
--            create tables), CREATE and TEMP on the database
--   reader : USAGE on the schemas, SELECT on every table, view and sequence, EXECUTE on the
--            functions that cannot change data (STABLE or IMMUTABLE, SECURITY INVOKER)
--   ingest : member of reader; INSERT and UPDATE on what a batch writes (events and their
--            partitions, dead letters, batch markers, stream state, counters, declared streams),
--            DELETE too on what triggers keep (rollups, sessions, join results), UPDATE of the
--            progress columns of streams, joins and session_defs (slidewin.role_progress),
--            TEMP (the staging table)
--   jobs   : member of reader; DELETE on the raw tables (the nibbles), what their triggers keep,
--            the job store and run records, UPDATE of the progress columns of streams and
--            joins and of the holder of slidewin.job_locks, and EXECUTE on
--            slidewin.refresh_minute_history
-- No role but the owner may change a definition or a statement the registries hold
-- (slidewin.streams' and slidewin.joins' *_sql, run verbatim by their triggers): those columns
-- are granted to nobody, and slidewin.registry_guard refuses their change by anyone else.
-- EXECUTE on every function is revoked from PUBLIC (PostgreSQL grants it by default), so a
-- role outside the set calls none; ingest and jobs may call every SECURITY INVOKER function:
-- such a function runs with the caller's privileges, so the table grants above bound what it
-- can do. The SECURITY DEFINER functions, refresh_minute_history (a materialized view is
-- refreshed only by its owner) and session_def_forget (a removed, emptied session definition's
-- row), are granted to jobs alone.
CREATE OR REPLACE FUNCTION slidewin.grant_roles(p_prefix text)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_owner   text := p_prefix || '_owner';
    v_ingest  text := p_prefix || '_ingest';
    v_jobs    text := p_prefix || '_jobs';
    v_reader  text := p_prefix || '_reader';
    v_schemas text[] := ARRAY['slidewin', 'slidewin_streams', 'slidewin_rollups',
                              'slidewin_joins'];
    v_missing text;
    v_schema  text;
    r         record;
BEGIN
    SELECT string_agg(n, ', ') INTO v_missing
      FROM unnest(ARRAY[v_owner, v_ingest, v_jobs, v_reader]) AS n WHERE to_regrole(n) IS NULL;
    IF v_missing IS NOT NULL THEN
        RAISE EXCEPTION 'roles % do not exist', v_missing
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'run slidewin.create_roles(' || quote_literal(p_prefix) || ') first';
    END IF;
    EXECUTE format('GRANT CREATE, TEMPORARY ON DATABASE %I TO %I', current_database(), v_owner);
    EXECUTE format('GRANT TEMPORARY ON DATABASE %I TO %I', current_database(), v_ingest);
    FOR r IN SELECT m.name FROM unnest(ARRAY[v_ingest, v_jobs]) AS m(name)
              WHERE NOT pg_has_role(m.name, v_reader, 'MEMBER') LOOP
        EXECUTE format('GRANT %I TO %I', v_reader, r.name);
    END LOOP;

    -- ownership: schemas, then relations (sequences owned by a column move with their table),
    -- then functions; only what the owner does not own yet (ALTER ... OWNER locks a table
    -- against everything, the ingest's reads and writes too), relations in oid order, the
    -- order slidewin.role_handover lists them in
    FOREACH v_schema IN ARRAY v_schemas LOOP
        CONTINUE WHEN to_regnamespace(v_schema) IS NULL
                   OR (SELECT nspowner FROM pg_namespace WHERE nspname = v_schema)
                      = v_owner::regrole;
        EXECUTE format('ALTER SCHEMA %I OWNER TO %I', v_schema, v_owner);
    END LOOP;
    FOR r IN
        SELECT c.oid::regclass AS rel, c.relkind
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = ANY(v_schemas) AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
           AND c.relowner <> v_owner::regrole
         ORDER BY c.oid
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO %I',
                       CASE r.relkind WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'v' THEN 'VIEW'
                                      WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END,
                       r.rel, v_owner);
    END LOOP;
    FOR r IN
        SELECT c.oid::regclass AS rel
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = ANY(v_schemas) AND c.relkind = 'S'
           AND c.relowner <> v_owner::regrole
         ORDER BY c.oid
    LOOP
        EXECUTE format('ALTER SEQUENCE %s OWNER TO %I', r.rel, v_owner);
    END LOOP;
    FOR r IN
        SELECT p.oid::regprocedure AS fn
          FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname = ANY(v_schemas) AND p.proowner <> v_owner::regrole
         ORDER BY p.oid
    LOOP
        EXECUTE format('ALTER ROUTINE %s OWNER TO %I', r.fn, v_owner);
    END LOOP;

    -- start from nothing, so a grant this version no longer makes does not linger; then
    -- reading: every schema, every relation
    FOREACH v_schema IN ARRAY v_schemas LOOP
        CONTINUE WHEN to_regnamespace(v_schema) IS NULL;
        EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %1$I FROM %2$I, %3$I, %4$I; '
                       'REVOKE ALL ON ALL SEQUENCES IN SCHEMA %1$I FROM %2$I, %3$I, %4$I; '
                       'REVOKE ALL ON ALL ROUTINES IN SCHEMA %1$I FROM %2$I, %3$I, %4$I',
                       v_schema, v_reader, v_ingest, v_jobs);
        EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM PUBLIC', v_schema);
        EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', v_schema, v_reader);
        EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA %I TO %I', v_schema, v_reader);
        EXECUTE format('GRANT SELECT ON ALL SEQUENCES IN SCHEMA %I TO %I', v_schema, v_reader);
        EXECUTE format('GRANT USAGE ON ALL SEQUENCES IN SCHEMA %I TO %I, %I',
                       v_schema, v_ingest, v_jobs);
    END LOOP;

    -- writing, table by table
    FOR r IN
        SELECT rel, role, privileges FROM (
            SELECT slidewin.role_objects(ARRAY['events', 'dead_letters', 'ingest_batches',
                                               'stream_state', 'counters']),
                   v_ingest, 'INSERT, UPDATE'
            UNION ALL
            SELECT slidewin.role_objects(ARRAY['rollups', 'rollups_coarse', 'session_store',
                                               'session_tombstones']),
                   v_ingest, 'INSERT, UPDATE, DELETE'
            UNION ALL
            SELECT slidewin.role_objects(ARRAY['events']), v_jobs, 'DELETE'
            UNION ALL
            SELECT slidewin.role_objects(ARRAY['retention_state', 'counters']),
                   v_jobs, 'INSERT, UPDATE'
            UNION ALL
            -- the jobs' single-flight locks: holding one is updating its row
            SELECT slidewin.role_objects(ARRAY['job_locks']), v_jobs,
                   'UPDATE (holder_pid, held_since)'
            UNION ALL
            SELECT slidewin.role_objects(ARRAY['rollups', 'rollups_coarse', 'session_store',
                                               'session_tombstones', 'job_runs',
                                               'apscheduler_jobs']),
                   v_jobs, 'INSERT, UPDATE, DELETE'
            UNION ALL
            -- the registries: UPDATE of their progress columns alone (slidewin.role_progress),
            -- never of a definition or of a statement the triggers run (*_sql)
            SELECT p.rel, p.role, p.privileges FROM slidewin.role_progress(v_ingest, v_jobs) p
            UNION ALL
            SELECT c.oid::regclass, x.role, x.privileges
              FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
              JOIN (VALUES ('slidewin_streams', v_ingest, 'INSERT, UPDATE'),
                           ('slidewin_streams', v_jobs, 'DELETE'),
                           ('slidewin_rollups', v_ingest, 'INSERT, UPDATE, DELETE'),
                           ('slidewin_rollups', v_jobs, 'INSERT, UPDATE, DELETE'),
                           ('slidewin_joins', v_ingest, 'INSERT, UPDATE, DELETE'),
                           ('slidewin_joins', v_jobs, 'INSERT, UPDATE, DELETE'))
                   AS x(schema, role, privileges) ON x.schema = n.nspname
             WHERE c.relkind IN ('r', 'p')
        ) AS g(rel, role, privileges)
    LOOP
        EXECUTE format('GRANT %s ON TABLE %s TO %I', r.privileges, r.rel, r.role);
    END LOOP;

    -- functions: none for PUBLIC; reading ones for the reader; the rest for ingest and jobs
    FOR r IN
        SELECT p.oid::regprocedure AS fn, p.provolatile, p.prosecdef, p.proname
          FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname = ANY(v_schemas)
    LOOP
        EXECUTE format('REVOKE ALL ON ROUTINE %s FROM PUBLIC', r.fn);
        IF r.prosecdef THEN
            IF r.proname IN ('refresh_minute_history', 'session_def_forget') THEN
                EXECUTE format('GRANT EXECUTE ON ROUTINE %s TO %I', r.fn, v_jobs);
            END IF;
        ELSIF r.provolatile <> 'v' THEN
            EXECUTE format('GRANT EXECUTE ON ROUTINE %s TO %I', r.fn, v_reader);
        ELSE
            EXECUTE format('GRANT EXECUTE ON ROUTINE %s TO %I, %I', r.fn, v_ingest, v_jobs);
        END IF;
    END LOOP;

    -- tables a member of the owner role creates under SET ROLE get the same grants at once
    EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I REVOKE EXECUTE ON ROUTINES FROM PUBLIC',
                   v_owner);
    FOREACH v_schema IN ARRAY v_schemas LOOP
        CONTINUE WHEN to_regnamespace(v_schema) IS NULL;
        EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA %I '
                       'GRANT SELECT ON TABLES TO %I', v_owner, v_schema, v_reader);
    END LOOP;
    EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA slidewin_streams '
                   'GRANT INSERT, UPDATE ON TABLES TO %I', v_owner, v_ingest);
    EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA slidewin_streams '
                   'GRANT DELETE ON TABLES TO %I', v_owner, v_jobs);
    EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA slidewin_rollups, '
                   'slidewin_joins GRANT INSERT, UPDATE, DELETE ON TABLES TO %I, %I',
                   v_owner, v_ingest, v_jobs);
END
$$;
