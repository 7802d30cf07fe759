-- slidewin.stream_measure_ddl(measure, type): the rollup columns of one measure (see
-- slidewin.stream_rollup_sql), as column definitions for CREATE or ALTER TABLE. Every column has
-- a default, so a measure added to a stream whose column is new needs no backfill.
CREATE OR REPLACE FUNCTION slidewin.stream_measure_ddl(p_measure text, p_type text)
RETURNS text[]
LANGUAGE sql IMMUTABLE
AS $$
    SELECT ARRAY[format('%I bigint NOT NULL DEFAULT 0', p_measure || '_n'),
                 format('%I numeric NOT NULL DEFAULT 0', p_measure || '_sum'),
                 format('%I %s', p_measure || '_min', p_type),
                 format('%I %s', p_measure || '_max', p_type)]
        || CASE WHEN p_type = 'double precision' THEN
               ARRAY[format('%I bigint NOT NULL DEFAULT 0', p_measure || '_nan'),
                     format('%I bigint NOT NULL DEFAULT 0', p_measure || '_pinf'),
                     format('%I bigint NOT NULL DEFAULT 0', p_measure || '_ninf')]
           ELSE '{}'::text[] END
$$;
