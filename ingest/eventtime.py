"""A ``ts`` given as text: ISO-8601, or an epoch number in a unit that is a documented rule.

ISO-8601 is parsed by Spark (a naive time is UTC: the session time zone). A ``ts`` that is a
number (JSON ``1767268800``, CSV ``1767268800000``, a Parquet integer column read as JSON, or
a decimal such as ``1767268800.25``) counts time since 1970-01-01T00:00:00Z in the unit
``slidewin ingest --epoch-unit`` names. The default, ``auto``, picks the unit by the
number's magnitude -- the one reading that puts a present-day time in the present:

=====================  ============  ==================================================
``|n|`` (``auto``)     read as       the times it covers (as far before 1970, negative)
=====================  ============  ==================================================
below 1e11             seconds       1970 to year 5138
1e11 to below 1e14     milliseconds  1973-03-03T09:46:40Z to year 5138
1e14 to below 1e17     microseconds  1973-03-03T09:46:40Z to year 5138
1e17 and above         nanoseconds   from 1973-03-03T09:46:40Z
=====================  ============  ==================================================

So under ``auto`` a time in milliseconds before 1973-03-03T09:46:40Z (or microseconds or
nanoseconds as early) is read as a coarser unit: a producer sending such times must say
``--epoch-unit ms`` (or ``us``, ``ns``). ``s``, ``ms``, ``us`` and ``ns`` read every number in
that unit. A fraction is allowed in every unit (``1767268800.25`` seconds is a quarter second
past) and kept to the microsecond, the store's precision (finer digits are cut, toward the
past); so is an exponent (``1.76726880025E9``, how JSON numbers with a fraction reach the
parser). A number whose time falls outside years 0001-9999 is ``bad_ts``, never a wrapped or
clamped time.

Why magnitudes: the same producer code sends seconds in one language (Python's ``time.time()``)
and milliseconds in another (JavaScript's ``Date.now()``); read as milliseconds, seconds
quietly became dates in January 1970 -- stored, or expired, never refused.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from pyspark.sql import Column
from pyspark.sql import functions as F

# PostgreSQL's timestamptz reaches further both ways; ISO-8601's four-digit years are the range
# both Spark and every producer agree on, so anything outside is bad_ts, never a failed COPY
MIN_TS = datetime(1, 1, 1, tzinfo=UTC)
MAX_TS = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
NUL = "\u0000"

# (exclusive upper bound of |n|, microseconds per unit) in the order ``auto`` tries them
AUTO_BOUNDS = ((10**11, 10**6), (10**14, 10**3), (10**17, 1))
PER_UNIT_MICROS = {"s": 10**6, "ms": 10**3, "us": 1}  # ns: divided by 1000
# |microseconds| beyond this are past year 9999 in any unit (9999-12-31 is 2.5e17 us): a bound
# that keeps every multiplication inside 64 bits (Spark's ANSI mode fails a job on overflow)
MAX_MICROS = 10**18
UNIT_WORDS = {
    "auto": "epoch seconds, ms, us or ns (by magnitude)",
    "s": "epoch seconds",
    "ms": "epoch milliseconds",
    "us": "epoch microseconds",
    "ns": "epoch nanoseconds",
}
# digits, an optional fraction and exponent: the numbers this module reads (a JSON number with
# a fraction reaches the parser in Java's rendering, 1.76726880025E9)
NUMBER = r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$"


def parse_ts(ts_s: Column, epoch_unit: str) -> Column:
    """ISO-8601 or an epoch number in ``epoch_unit``, within years 0001-9999; NULL otherwise.
    Spark's parser stops at a NUL and ignores the rest, so a ts holding one is refused here
    rather than stored as a prefix of itself."""
    parsed = parse_ts_unchecked(ts_s, epoch_unit)
    usable = ~ts_s.contains(NUL) & parsed.between(ts_lit(MIN_TS), ts_lit(MAX_TS))
    return F.when(usable, parsed)


def parse_ts_unchecked(ts_s: Column, epoch_unit: str) -> Column:
    """``parse_ts`` before its checks (a NUL, years 0001-9999): for a caller that checks the
    result once it is a column of its own, so that Spark parses each time once."""
    # an ISO time holds a ":", which spares the regular expression for almost every row
    number = ~ts_s.contains(":") & ts_s.rlike(NUMBER)
    return F.when(number, to_timestamp(ts_s, epoch_unit)).otherwise(F.try_to_timestamp(ts_s))


def ts_lit(value: datetime) -> Column:
    """A timestamp literal by its microseconds: a Python datetime before 1582 reaches Spark
    shifted by the Julian/Gregorian gap (year 1 came out two days late)."""
    micros = (value - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    return F.timestamp_micros(F.lit(micros))


def to_timestamp(text: Column, unit: str) -> Column:
    """``text`` (a string matching ``NUMBER``) as a timestamp in ``unit``; NULL when it does
    not fit. One decimal path for integers and fractions alike: small generated code matters
    more here than the cost of the cast (see ``ingest.rules.reason_steps``)."""
    n = text.try_cast("decimal(38,9)")
    if unit == "auto":
        factor: Column | None = None
        for bound, per in AUTO_BOUNDS:
            value, within = F.lit(Decimal(per)), _within(n, bound)
            factor = F.when(within, value) if factor is None else factor.when(within, value)
        assert factor is not None
        factor, bound = factor.otherwise(F.lit(Decimal("0.001"))), MAX_MICROS * 1000
    else:
        per_unit = PER_UNIT_MICROS.get(unit)
        factor = F.lit(Decimal(per_unit) if per_unit else Decimal("0.001"))
        bound = MAX_MICROS // per_unit if per_unit else MAX_MICROS * 1000
    micros = F.floor(n * factor).try_cast("bigint")
    return F.timestamp_micros(F.when(_within(n, bound), micros))


def _within(n: Column, bound: int) -> Column:
    """``-bound < n < bound`` (no ``abs``: the smallest bigint has no positive twin)."""
    low, high = (-bound, bound) if bound < 2**63 else (Decimal(-bound), Decimal(bound))
    return (n > F.lit(low)) & (n < F.lit(high))


def from_nanos(n: Column) -> Column:
    """A bigint of nanoseconds in whole microseconds, rounded toward the past (``div`` rounds
    toward zero, which would move times before 1970 forward); exactly, with no floating
    point: below zero, floor(n / 1000) = ((n + 1) div 1000) - 1, never past 64 bits."""
    thousand = F.lit(1000)
    micros = F.when(n < F.lit(0), F.call_function("div", n + F.lit(1), thousand) - F.lit(1))
    return micros.otherwise(F.call_function("div", n, thousand))
