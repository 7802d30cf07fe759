-- slidewin.stream_grains(stream): the grains, in seconds, a stream's rollups are kept at, finest
-- first, each dividing the next: 1 s and 1 min for a declared stream (slidewin_rollups.<name>,
-- "<name>#minute"); 1 s, 10 s, 1 min and 1 h for the built-in events (slidewin.rollups and
-- slidewin.rollup_grains() in slidewin.rollups_coarse). slidewin.stream_rollups reads each.
-- NULL for a stream that does not exist (its callers have looked it up: slidewin.stream_row).
CREATE OR REPLACE FUNCTION slidewin.stream_grains(p_stream text)
RETURNS integer[]
LANGUAGE sql STABLE
AS $$
    SELECT CASE WHEN s.builtin THEN ARRAY[1] || slidewin.rollup_grains() ELSE ARRAY[1, 60] END
      FROM slidewin.streams AS s WHERE s.name = p_stream
$$;
