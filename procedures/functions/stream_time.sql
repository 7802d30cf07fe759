-- slidewin.stream_time(): the newest second that holds retained events ("stream time", as in
-- Faust's relative_to_stream), or NULL when the store is empty. One index probe on rollups.
CREATE OR REPLACE FUNCTION slidewin.stream_time()
RETURNS timestamptz
LANGUAGE sql STABLE
AS $$
    SELECT max(sec) FROM slidewin.rollups
$$;
