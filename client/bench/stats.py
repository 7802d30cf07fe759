"""The benchmarks' one statistics helper: nearest-rank percentiles and medians.

Nearest rank (not interpolation): every figure reported is a time or rate really observed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence


def percentile(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sample."""
    ordered = sorted(samples)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def median(samples: Iterable[float]) -> float:
    """The median of repeated runs (the figure a benchmark reports for a noisy machine)."""
    return statistics.median(samples)
