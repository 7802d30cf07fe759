"""The ``slidewin`` command: a thin click shell over db/, ingest/ and jobs/."""
