"""``slidewin serve``: a read-only web app over the store.

- ``app``: the FastAPI app -- the dashboard page, the JSON API under ``/api/v1`` (the answers of
  ``client.answers``, as the CLI's ``--json`` gives them), live updates, ``/metrics``;
- ``dashboard``: what the page shows of one stream, read in one go;
- ``live``: server-sent events driven by the store's LISTEN signals, one connection per process;
- ``metrics``: the store's counters and gauges in Prometheus' text format;
- ``jsonout``: the JSON of every response (browser-safe integers);
- ``server``: uvicorn, stopped by SIGINT/SIGTERM like every long-running command;
- ``static/``: the page, its script and style, and the vendored chart library (uPlot, MIT).
"""
