"""slidewin: a sliding-retention store of timestamped events in PostgreSQL.

Everything installs under this one name: ``slidewin.db`` (connections, the schema, typed calls
to the procedures), ``slidewin.ingest`` (the Spark ingest), ``slidewin.jobs`` (scheduled
retention), ``slidewin.client`` (the ``slidewin`` command, simulator, benchmarks, dashboard) and
``slidewin.procedures`` (the SQL). In the source tree those are the top-level folders of the same
names; ``slidewin/`` links to them, so the tools and an editable install see one namespace.
"""
