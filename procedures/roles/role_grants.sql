-- slidewin.role_grants(prefix default 'slidewin'): what each role of the set may do in this
-- database, one row per role and object: the role, the kind of object (database, schema, table,
-- sequence, column -- a grant on some columns of a table only --, function, member of), the
-- object's name and its privileges. Read by
-- `slidewin db roles --json`; reads the catalogs only.
CREATE OR REPLACE FUNCTION slidewin.role_grants(p_prefix text DEFAULT 'slidewin')
RETURNS TABLE (role text, kind text, object text, privileges text[])
LANGUAGE sql
STABLE
AS $$
    WITH roles AS (
        SELECT r.oid, r.rolname
          FROM pg_roles r
         WHERE r.rolname IN (p_prefix || '_owner', p_prefix || '_ingest', p_prefix || '_jobs',
                             p_prefix || '_reader')
    ), schemas AS (
        SELECT oid, nspname FROM pg_namespace
         WHERE nspname IN ('slidewin', 'slidewin_streams', 'slidewin_rollups', 'slidewin_joins')
    ), granted AS (
        SELECT 'database' AS kind, d.datname::text AS object, a.grantee, a.privilege_type
          FROM pg_database d, aclexplode(d.datacl) a WHERE d.datname = current_database()
        UNION ALL
        SELECT 'schema', s.nspname::text, a.grantee, a.privilege_type
          FROM pg_namespace n JOIN schemas s ON s.oid = n.oid, aclexplode(n.nspacl) a
        UNION ALL
        SELECT CASE c.relkind WHEN 'S' THEN 'sequence' ELSE 'table' END, c.oid::regclass::text,
               a.grantee, a.privilege_type
          FROM pg_class c JOIN schemas s ON s.oid = c.relnamespace, aclexplode(c.relacl) a
         WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
        UNION ALL
        SELECT 'column', c.oid::regclass::text || '.' || quote_ident(t.attname), a.grantee,
               a.privilege_type
          FROM pg_class c JOIN schemas s ON s.oid = c.relnamespace
          JOIN pg_attribute t ON t.attrelid = c.oid AND t.attnum > 0 AND NOT t.attisdropped,
               aclexplode(t.attacl) a
        UNION ALL
        SELECT 'function', p.oid::regprocedure::text, a.grantee, a.privilege_type
          FROM pg_proc p JOIN schemas s ON s.oid = p.pronamespace, aclexplode(p.proacl) a
    )
    SELECT r.rolname::text, g.kind, g.object, array_agg(g.privilege_type ORDER BY g.privilege_type)
      FROM granted g JOIN roles r ON r.oid = g.grantee
     GROUP BY 1, 2, 3
    UNION ALL
    SELECT r.rolname::text, 'member of', g.rolname::text, ARRAY[]::text[]
      FROM pg_auth_members m JOIN roles r ON r.oid = m.member JOIN pg_roles g ON g.oid = m.roleid
    ORDER BY 1, 2, 3;
$$;
