-- 0004: one family of window functions. The built-in stream's own twins of the stream window
-- functions are gone: its windows are the stream functions' (slidewin.stream_hopping,
-- stream_sliding, stream_windows_at, stream_summary over events' rollups, which
-- slidewin.stream_rollups reads), and slidewin.hopping, sliding, windows_at, key_window,
-- key_windows_at and window_summary call them. A store made before keeps none of the twins.
DROP FUNCTION IF EXISTS slidewin.hopping_series(text, integer, integer, timestamptz, timestamptz,
                                                boolean);
DROP FUNCTION IF EXISTS slidewin.sliding_series(text, interval, timestamptz, timestamptz);
DROP FUNCTION IF EXISTS slidewin.rollup_pieces(timestamptz[]);
DROP FUNCTION IF EXISTS slidewin.key_buckets(text, integer, timestamptz, timestamptz);
DROP FUNCTION IF EXISTS slidewin.rollup_buckets(integer, timestamptz, timestamptz);
