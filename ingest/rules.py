"""Validation rules as Spark Columns: each row gets the reason and detail of the first rule
that holds, in flat CASE expressions built once per plan (``ingest.parse``'s steps)."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

# A validation rule: (condition, reason code, detail text); the first rule that holds wins.
Rule = tuple[Column, "str | Column", Column]
# One step of a plan: a select or a filter whose Columns are built once, because building a
# Column costs a py4j round trip (see docs/architecture.md, "Why the code is shaped so").
Step = Callable[[DataFrame], DataFrame]
_RULE = "_slidewin_rule"  # the staged index of the rule that holds (input columns may be named so)


def select(*columns: Column | str) -> Step:
    return lambda df: df.select(*columns)


def got(text: str, value: Column) -> Column:
    """A detail naming the bad value. A value may hold NUL (escaped in JSON): ``batch.split``
    makes the details of rejected rows storable, on the driver -- cleaned here, or anywhere in
    the plan, Spark spent as much on it as on the whole parse, for every row."""
    return F.concat(F.lit(text + ", got "), F.coalesce(value.cast("string"), F.lit("null")))


def reason_steps(
    rules: list[Rule], columns: list[Column], *, cheap: bool = False
) -> list[Step]:
    """``columns`` plus ``reason, detail`` of the first rule that holds (both NULL if none).

    Flat CASE expressions rather than one struct per row, which Spark would build and unpack
    for every row. ``cheap`` conditions (NULL tests, comparisons) are evaluated in one
    projection. Expensive ones (regular expressions, timestamp parsing) are evaluated once, in
    a projection of their own that finds the first rule that holds (its index; Spark keeps it
    apart because the next one reads it more than once); reason and detail are then picked by
    that index. So each condition is compiled once, not once for the reason and again for the
    detail: Spark compiles a whole stage into one Java method, and HotSpot never compiles a
    method of over 8,000 bytes of bytecode, which then runs in the interpreter (the text
    stage was over that). The detail is computed only for a row that has a reason."""
    if cheap:
        reason: Column | None = None
        detail: Column | None = None
        for cond, code, text in rules:
            value = code if isinstance(code, Column) else F.lit(code)
            reason = F.when(cond, value) if reason is None else reason.when(cond, value)
            detail = F.when(cond, text) if detail is None else detail.when(cond, text)
        assert reason is not None and detail is not None, "at least one rule"
        return [select(*columns, reason.cast("string").alias("reason"),
                       F.when(reason.isNotNull(), detail.cast("string")).alias("detail"))]
    which = _first_of([cond for cond, _, _ in rules])
    rule = F.col(_RULE)
    codes = [code if isinstance(code, Column) else F.lit(code) for _, code, _ in rules]
    reason = _pick(rule, codes)
    detail = _pick(rule, [text for _, _, text in rules])
    return [
        select("*", which.alias(_RULE)),
        select(*columns, F.when(rule.isNotNull(), reason.cast("string")).alias("reason"),
               F.when(rule.isNotNull(), detail.cast("string")).alias("detail")),
    ]


def _first_of(conditions: list[Column]) -> Column:
    """The index of the first condition that holds, NULL if none does."""
    first = F.when(conditions[0], F.lit(0))
    for index, cond in enumerate(conditions[1:], start=1):
        first = first.when(cond, F.lit(index))
    return first


def _pick(index: Column, values: list[Column]) -> Column:
    """``values[index]`` (NULL for a NULL index)."""
    picked = F.when(index == F.lit(0), values[0])
    for i, value in enumerate(values[1:], start=1):
        picked = picked.when(index == F.lit(i), value)
    return picked
