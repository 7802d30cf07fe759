"""``slidewin serve``: the live dashboard, the JSON API and Prometheus metrics of the store
(a thin shell over ``client.serve``; the web stack is imported when the command runs)."""

from __future__ import annotations

from datetime import timedelta

import click

from slidewin.client.cli.context import AppContext, pass_app
from slidewin.client.cli.interrupts import stopped_by
from slidewin.client.cli.options import DURATION_MS, DurationType
from slidewin.db.schema import require_schema


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on; 0.0.0.0 for every interface (nothing asks who "
                   "is connecting: keep it behind your own network's rules).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="The port; 0 takes a free one (stderr says which).")
@click.option("--update-every", "update_every", type=DURATION_MS, default="1s",
              show_default=True,
              help="A dashboard view is read again at most this often, however often the "
                   "store signals a change (bare numbers are ms).")
@click.option("--role", default=None, metavar="ROLE",
              help="Connect as ROLE (SET ROLE on every connection); refuse to start if the "
                   "user cannot. Default: slidewin_reader when `slidewin db roles` made it and "
                   "the user is a member, else the user itself, with a warning.")
@click.option("--header-timeout", "header_timeout", type=DurationType(minimum=timedelta(
                  milliseconds=100)), default="10s", show_default=True,
              help="A client must send a request's headers within this long of connecting (or "
                   "of its previous response), else it gets 408 and is disconnected: a client "
                   "trickling its headers cannot hold a connection open (slowloris).")
@click.option("--pool", "pool_size", type=click.IntRange(1, 64), default=8, show_default=True,
              help="Database connections for requests (plus one that listens for changes).")
@pass_app
def serve_command(app: AppContext, host: str, port: int, update_every: timedelta,
                  pool_size: int, role: str | None, header_timeout: timedelta) -> None:
    """Serve a live view of the store: a dashboard at /, the JSON API under /api/v1 (its
    OpenAPI document at /api/v1/openapi.json) and Prometheus metrics at /metrics. Read-only:
    every connection is the reader role (see --role) and runs read-only transactions; the
    page needs no internet. Runs until Ctrl-C or SIGTERM.

    Each API route returns what the matching command's --json prints (integers beyond 2**53
    as strings); live updates come as server-sent events from /api/v1/live, driven by the
    store's change signals over one connection.

    \b
    Examples:
      slidewin serve                          # http://127.0.0.1:8000/
      slidewin serve --host 0.0.0.0 --port 8080
      slidewin serve --role slidewin_reader  # refuse to start unless it can be the reader
      curl -s localhost:8000/api/v1/query/avg?seconds=30
      curl -s localhost:8000/metrics | grep slidewin_ingest
    """
    from slidewin.db.roles import reader_dsn

    with app.connect() as conn:  # fail now, with the fix, not on the first request
        require_schema(conn)
        dsn, warning = reader_dsn(conn, app.dsn, role)
    if warning is not None:  # stderr, whatever -q says: not progress
        click.echo(f"warning: {warning}", err=True)
    from slidewin.client.serve.server import serve

    def ready(url: str) -> None:
        app.progress(f"slidewin serve: dashboard {url}, API {url}api/v1/, metrics {url}metrics "
                     "(Ctrl-C stops)")

    stop = serve(dsn, host, port, on_ready=ready, min_interval=update_every.total_seconds(),
                 pool_size=pool_size, header_timeout_s=header_timeout.total_seconds())
    app.progress("slidewin serve stopped")
    stopped_by(stop)
