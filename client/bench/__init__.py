"""The benchmarks behind ``slidewin bench``: each measures side by side in one run (ratios)."""
