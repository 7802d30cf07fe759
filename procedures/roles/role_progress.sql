-- slidewin.role_progress(ingest, jobs): the UPDATE grants the ingest and the jobs roles get on
-- the registries, column by column: only the progress each one writes (a batch's counters and
-- watermarks, a nibble's retired_through), never a definition and never a column holding a
-- statement (*_sql) that triggers and functions run verbatim as whoever fires them. One row per
-- table and role, as slidewin.grant_roles applies it ('UPDATE (col, ...)'); a column listed
-- here that the table does not have (yet) is left out, and a *_sql column never goes in.
--   slidewin.streams      both: retired_through (the stream nibble; the ingest also needs one
--                         updatable column for the FOR SHARE lock its batch holds on the row)
--   slidewin.joins        ingest: pairs and late counts (joins_on_insert); both: watermark and
--                         outer-row counts (join_advance, run by each batch and the jobs' tick)
--   slidewin.session_defs ingest: stream time, batch base, version and counters
--                         (session_begin, sessions_apply, sessions_late, the sink's timing)
-- A new progress column a role writes must be added here, or that role's writes fail with
-- "permission denied" (tests/test_roles.py runs each role's part as that role).
CREATE OR REPLACE FUNCTION slidewin.role_progress(p_ingest text, p_jobs text)
RETURNS TABLE (rel regclass, role text, privileges text)
LANGUAGE sql
STABLE
AS $$
    SELECT c.oid::regclass, g.role,
           'UPDATE (' || string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) || ')'
      FROM (VALUES
            ('streams', p_ingest, ARRAY['retired_through']),
            ('streams', p_jobs, ARRAY['retired_through']),
            ('joins', p_ingest, ARRAY['pairs', 'late_left', 'late_right', 'watermark',
                                      'left_only', 'right_only']),
            ('joins', p_jobs, ARRAY['watermark', 'left_only', 'right_only']),
            ('session_defs', p_ingest, ARRAY['stream_ts', 'base_ts', 'base_xid', 'version',
                                             'merges', 'late', 'events', 'created',
                                             'apply_seconds', 'longest_key', 'longest_start',
                                             'longest_end'])
           ) AS g(tab, role, cols)
      JOIN pg_class c ON c.oid = to_regclass('slidewin.' || g.tab)
      JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = ANY(g.cols)
                         AND a.attnum > 0 AND NOT a.attisdropped
     WHERE a.attname NOT LIKE '%\_sql'
     GROUP BY c.oid, g.role;
$$;
