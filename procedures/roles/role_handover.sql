-- slidewin.role_handover(prefix): the objects of the slidewin schemas that <prefix>_owner does
-- not own yet, each with the statement that hands it over: schemas, then tables, views and
-- foreign tables, then sequences no column owns, then routines, each kind in oid order (the
-- order slidewin.grant_roles takes them in). `slidewin db roles` runs them one per transaction,
-- each under a short lock_timeout, so that handing a table over never holds its lock while
-- waiting for another (no deadlock with the ingest or the jobs); an empty answer means
-- slidewin.grant_roles takes no lock stronger than its grants'. Reads the catalogs only.
CREATE OR REPLACE FUNCTION slidewin.role_handover(p_prefix text)
RETURNS TABLE (object text, statement text)
LANGUAGE sql
STABLE
AS $$
    WITH owner AS (SELECT to_regrole(p_prefix || '_owner') AS oid),
    schemas AS (
        SELECT n.oid, n.nspname, n.nspowner FROM pg_namespace n
         WHERE n.nspname IN ('slidewin', 'slidewin_streams', 'slidewin_rollups', 'slidewin_joins')
    )
    SELECT x.object, x.statement FROM (
        SELECT 1 AS step, s.oid AS oid, s.nspname::text AS object,
               format('ALTER SCHEMA %I OWNER TO %I', s.nspname, p_prefix || '_owner') AS statement
          FROM schemas s, owner o WHERE s.nspowner <> o.oid
        UNION ALL
        SELECT 2, c.oid, c.oid::regclass::text,
               format('ALTER %s %s OWNER TO %I',
                      CASE c.relkind WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'v' THEN 'VIEW'
                                     WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END,
                      c.oid::regclass, p_prefix || '_owner')
          FROM pg_class c JOIN schemas s ON s.oid = c.relnamespace, owner o
         WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND c.relowner <> o.oid
        UNION ALL
        SELECT 3, c.oid, c.oid::regclass::text,
               format('ALTER SEQUENCE %s OWNER TO %I', c.oid::regclass, p_prefix || '_owner')
          FROM pg_class c JOIN schemas s ON s.oid = c.relnamespace, owner o
         WHERE c.relkind = 'S' AND c.relowner <> o.oid
           AND NOT EXISTS (SELECT FROM pg_depend d
                            WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                              AND d.deptype IN ('a', 'i'))
        UNION ALL
        SELECT 4, p.oid, p.oid::regprocedure::text,
               format('ALTER ROUTINE %s OWNER TO %I', p.oid::regprocedure, p_prefix || '_owner')
          FROM pg_proc p JOIN schemas s ON s.oid = p.pronamespace, owner o
         WHERE p.proowner <> o.oid
    ) AS x
     WHERE (SELECT oid FROM owner) IS NOT NULL
     ORDER BY x.step, x.oid;
$$;
