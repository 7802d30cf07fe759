"""The answers the CLI's ``--json`` and the web API (``slidewin serve``) both give: one function
per question, taking a connection and the question's parameters, returning an answer whose
``as_json()`` is the JSON object. ``client.cli`` prints it (and words it for a terminal);
``client.serve`` serves it. So a route and the command that ask the same question return the
same object.

- ``windows``: ``query`` and the time, count and current windows (``windows ...``);
- ``sessions``: session window definitions and their sessions;
- ``store``: store and stream status, streams, dead letters, ingest batches, info, health;
- ``jobs``: scheduled jobs, their status and runs;
- ``joins``: joins, where they stand, their answers.
"""
