-- slidewin.rollup_grains(): the coarser grains, in seconds, kept in slidewin.rollups_coarse on top
-- of the per-second rollups -- the owner of the list (the table's CHECK repeats it). Each divides
-- the next, so every bucket is made of whole buckets of the grain below: 1 s < 10 s < 1 min < 1 h.
CREATE OR REPLACE FUNCTION slidewin.rollup_grains()
RETURNS integer[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT ARRAY[10, 60, 3600] $$;
