-- Every stream an interval join reads (or an asof join as its table) has its join triggers
-- (slidewin.join_triggers): a store made before joins_refuse_change existed gets it when
-- slidewin db init applies this file.
DO $$
BEGIN
    PERFORM slidewin.join_triggers(s.name)
       FROM slidewin.streams s
      WHERE EXISTS (SELECT 1 FROM slidewin.joins j
                     WHERE (j.kind = 'interval' AND s.name IN (j.left_stream, j.right_stream))
                        OR (j.right_table AND s.name = j.right_stream));
END
$$;
