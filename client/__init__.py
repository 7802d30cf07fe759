"""The user-facing side: the ``slidewin`` command line (cli/), the benchmarks (bench/) and the
client simulator (sim/), over the libraries in db/, ingest/ and jobs/."""
