"""A stream declaration guessed from a sample file (``slidewin streams add --infer FILE``).

The guess is printed for the user to accept, never applied silently: JSON numbers without a
fraction are bigint, with one double precision; strings that read as ISO-8601 times are
timestamptz; objects and arrays jsonb; everything else text. The key is the first text or
integer column whose name ends in ``id`` or is ``key`` (else the first text column), the time the
first timestamptz column (``ts``, ``time`` or ``timestamp`` preferred), and every other numeric
column is a measure.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from slidewin.db.errors import ConfigError
from slidewin.db.streams import Column

SAMPLE_RECORDS = 1000
_ORDER = ("boolean", "bigint", "double precision", "timestamptz", "text", "jsonb")


@dataclass(frozen=True)
class Inferred:
    columns: tuple[Column, ...]
    key: str
    time: str
    measures: tuple[str, ...]


def infer(path: Path, key: str | None = None, time: str | None = None) -> Inferred:
    """Guess a declaration from up to SAMPLE_RECORDS records of a JSONL, CSV or Parquet file."""
    records = _sample(path)
    if not records:
        raise ConfigError(f"--infer {path}: no records found; give a file with some events")
    types: dict[str, str] = {}
    for record in records:
        for name, value in record.items():
            seen = _type_of(value)
            if seen is not None:
                types[name] = _wider(types.get(name), seen)
    names = [n for n in records[0] if n in types] + [
        n for n in types if n not in records[0]]
    columns = []
    for name in names:
        clean = name.strip().lower()
        if not clean or not clean[0].isalpha() or not all(c.isalnum() or c == "_" for c in clean):
            raise ConfigError(f"--infer {path}: field {name!r} is not a column name slidewin "
                              "accepts (letters, digits, _); rename it in the file, or declare "
                              "the stream by hand with --column")
        columns.append(Column(clean, types[name]))
    key = key or _pick_key(columns)
    time = time or _pick_time(columns)
    if key is None or time is None:
        missing = "--key" if key is None else "--time"
        raise ConfigError(f"--infer {path}: found no {missing.strip('-')} column; name it with "
                          f"{missing} COLUMN")
    cols = tuple(
        Column(c.name, "timestamptz" if c.name == time else c.type, c.name in (key, time))
        for c in columns
    )
    measures = tuple(c.name for c in cols if c.numeric and c.name not in (key, time))
    return Inferred(cols, key, time, measures)


def _sample(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
            return table.slice(0, SAMPLE_RECORDS).to_pylist()
        with path.open(encoding="utf-8", newline="") as f:
            if suffix == ".csv":
                reader = csv.DictReader(f)
                return [dict(r) for _, r in zip(range(SAMPLE_RECORDS), reader, strict=False)]
            out = []
            for line in f:
                if line.strip():
                    value = json.loads(line)
                    if isinstance(value, dict):
                        out.append(value)
                if len(out) >= SAMPLE_RECORDS:
                    break
            return out
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--infer {path}: cannot read it ({exc}); give a JSONL, CSV or "
                          "Parquet file") from None


def _type_of(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "bigint"
    if isinstance(value, float):
        return "double precision"
    if isinstance(value, datetime):
        return "timestamptz"
    if isinstance(value, dict | list):
        return "jsonb"
    text = str(value).strip()
    for guess, convert in (("bigint", int), ("double precision", float)):
        try:
            convert(text)
            return guess
        except ValueError:
            pass
    if text.lower() in ("true", "false"):
        return "boolean"
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
        return "timestamptz"
    except ValueError:
        return "text"


def _wider(old: str | None, new: str) -> str:
    if old is None or old == new:
        return new
    if {old, new} == {"bigint", "double precision"}:
        return "double precision"
    return "jsonb" if "jsonb" in (old, new) else "text"


def _pick_key(columns: list[Column]) -> str | None:
    for c in columns:
        if c.type in ("text", "bigint") and (c.name == "key" or c.name.endswith("id")):
            return c.name
    return next((c.name for c in columns if c.type == "text"), None)


def _pick_time(columns: list[Column]) -> str | None:
    times = [c.name for c in columns if c.type == "timestamptz"]
    for preferred in ("ts", "time", "timestamp", "event_time"):
        if preferred in times:
            return preferred
    return times[0] if times else None
