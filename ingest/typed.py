"""Records of a declared stream: files -> typed rows and dead letters, in plain Python.

A declared stream (``db.streams``) reads its own landing folder, ``<landing>/<name>/``. Each
file is parsed on the driver by its extension (any letter case):

* ``.jsonl``, ``.ndjson``, ``.json``: one JSON object per line; blank lines hold no record.
* ``.csv``: RFC 4180 (the ``csv`` module: a quoted field may hold commas, doubled quotes and
  line breaks); the first record is the header and names the columns. An empty field is NULL.
* ``.parquet``: read with pyarrow from the file's bytes; columns by name.

Columns are matched by name. Each record gets at most one reason, checked in this order:

``bad_encoding``  a line that is not valid UTF-8 (its exact bytes go to ``raw_bytes``); a
                  Parquet string that is not (the value's bytes go there); a value to store
                  that holds a lone surrogate (JSON's ``"\\ud800"``: half of a UTF-16 pair,
                  no character, which UTF-8 cannot encode)
``malformed``     not a JSON object / a CSV record with more fields than the header / a CSV
                  quote never closed / a CSV header naming a column twice, or a file pyarrow
                  cannot read (one dead letter per file)
``missing_field`` the key, the time column or a column declared ``required`` is absent or NULL
``bad_ts``        the time column is neither ISO-8601 (naive = UTC) nor an epoch number
                  (seconds, ms, us or ns by magnitude, ``ingest.eventtime``'s ``auto`` rule),
                  or falls outside years 0001-9999
``bad_type``      a value the column's type cannot hold (the detail names field, type, value)
``future``        the time is more than ``max_future`` ahead of the clock
``expired``       the time is older than now - the stream's history (when it has one)
``late``          the time is older than the stream's watermark (newest before - grace)

Conversions, per column type:

* ``text``: a JSON string as is; a JSON number or boolean as its JSON text (``12``, ``true``);
  an object or array, or a string holding NUL, is bad_type. The key, and any text column an
  index holds (a join's ``on`` column, an index made in psql), is at most ``MAX_KEY_CHARS``
  (200) characters -- the rule of the built-in stream's uuid; a btree index entry has room
  for about 2,700 bytes, and a longer value would fail the whole batch.
* ``bigint`` / ``integer``: an integral JSON number (``3``, ``3.0``, ``3e2``) or an integer
  string, within the type's range; ``1.5`` is bad_type; booleans are bad_type.
* ``double precision``: a number or numeric string, and the strings ``NaN``, ``Infinity``,
  ``-Infinity`` (``inf``/``nan`` in any case too); a finite number too large for a double is
  bad_type.
* ``numeric(p,s)``: exact (JSON numbers are read as decimals, never through a float), rounded
  to ``s`` digits half away from zero as PostgreSQL does; more than ``p - s`` digits before the
  point is bad_type. NaN and infinities are bad_type (they would poison the rollups' sums).
* ``boolean``: JSON ``true``/``false``, or the strings ``true``, ``false``, ``t``, ``f``,
  ``yes``, ``no``, ``1``, ``0`` (any case; CSV has no other way to say it).
* ``timestamptz``: as the time column (ISO-8601 or epoch number).
* ``jsonb``: any JSON value (a CSV field is parsed as JSON text; if it is not JSON it is
  bad_type); one holding NUL (``\\u0000``, in a string or a member's name) is bad_type, as
  jsonb cannot store it. JSON ``null`` is SQL NULL.

Fields the stream does not declare are kept in ``attrs`` (a JSON object, under jsonb's rule)
when the stream keeps extras; else they are dropped and the record is counted in ``extra``.

A JSON Lines file may start with a UTF-8 byte-order mark, as a CSV file may: it is no part of
the first line.

A dead letter's raw text is the line (JSONL), the record as written (CSV) or the row rendered
as JSON (Parquet); text PostgreSQL cannot hold is cleaned (invalid UTF-8 as U+FFFD, NUL as
``\\0``) and the exact bytes kept in ``raw_bytes``.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation, localcontext
from pathlib import PurePosixPath
from typing import Any

from slidewin.db.streams import Stream
from slidewin.ingest.eventtime import AUTO_BOUNDS, MAX_TS, MIN_TS

JSON_EXTENSIONS = ("jsonl", "ndjson", "json")
EXTENSIONS = (*JSON_EXTENSIONS, "csv", "parquet")
INT_RANGES = {"bigint": (-(2**63), 2**63 - 1), "integer": (-(2**31), 2**31 - 1)}
TRUE_WORDS = frozenset({"true", "t", "yes", "1"})
FALSE_WORDS = frozenset({"false", "f", "no", "0"})
_INTEGER = re.compile(r"^\s*[+-]?\d+\s*$")
_NUMBER = re.compile(r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$")
_SPECIAL_DOUBLES = {"nan": math.nan, "infinity": math.inf, "+infinity": math.inf,
                    "-infinity": -math.inf, "inf": math.inf, "+inf": math.inf,
                    "-inf": -math.inf}
_NUMERIC_TYPE = re.compile(r"^numeric\((\d+),(\d+)\)$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NUL = "\u0000"
BOM = b"\xef\xbb\xbf"
# the longest text an indexed column takes: the built-in stream's uuid rule (``ingest.parse``'s
# MAX_UUID_CHARS); 200 characters are at most 800 bytes, well within a btree entry (2,704)
MAX_KEY_CHARS = 200
_SURROGATE = re.compile("[\ud800-\udfff]")
# PostgreSQL's numeric: up to 131072 digits before the point and 16383 after
_NUMERIC_MAX_EXP = 131071
_NUMERIC_MIN_EXP = -16383
_WIDE = Context(prec=140_000, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class DeadLetter:
    source: str
    reason: str
    detail: str
    raw: str
    raw_bytes: bytes | None = None
    event_ts: datetime | None = None


@dataclass(frozen=True)
class Limits:
    """What a batch is classified against: the clock, and the stream state before the batch
    (``slidewin.stream_begin``: newest event time and watermark), the stream's grace and
    history, and how far ahead of the clock an event may be."""

    now: datetime
    newest_before: datetime | None = None
    watermark: datetime | None = None
    grace: timedelta = timedelta(0)
    history: timedelta | None = None
    max_future: timedelta | None = None

    @property
    def late_before(self) -> datetime | None:
        """Older than this is late: newest before - grace, or the watermark if later."""
        cut = _minus(self.newest_before, self.grace) if self.newest_before else None
        if cut is None or self.watermark is None:
            return cut or self.watermark
        return max(cut, self.watermark)

    @property
    def expired_before(self) -> datetime | None:
        return _minus(self.now, self.history) if self.history is not None else None

    @property
    def future_after(self) -> datetime | None:
        if self.max_future is None:
            return None
        try:
            return min(self.now + self.max_future, MAX_TS)
        except OverflowError:
            return MAX_TS


def _minus(t: datetime, span: timedelta) -> datetime:
    try:
        return max(t - span, MIN_TS)
    except OverflowError:
        return MIN_TS


@dataclass
class Parsed:
    """A batch's records: ``rows`` (one tuple per good record, in ``Layout.names`` order),
    ``bad`` dead letters, ``extra`` records that carried undeclared fields (dropped),
    ``copies`` good records dropped as in-batch duplicates of an earlier (key, time)."""

    rows: list[tuple[Any, ...]] = field(default_factory=list)
    bad: list[DeadLetter] = field(default_factory=list)
    extra: int = 0
    copies: int = 0
    max_ts: datetime | None = None
    # good rows of Parquet files read whole (``ingest.typed_arrow``), Arrow tables in
    # ``Layout.names`` order; a (key, time) repeated among them is left to the insert's
    # ON CONFLICT DO NOTHING (the first written wins, counted as a duplicate)
    tables: list[Any] = field(default_factory=list)
    # good records written already, piece by piece (``ingest.typed_sink``): counted, not kept
    counted: int = 0
    # the tables as COPY payloads, (form, data), once encoded (``ingest.typed_sink.encode``)
    payloads: list[tuple[str, bytes]] | None = None

    @property
    def good(self) -> int:
        """Good records handed to the insert: rows and the tables' rows."""
        return len(self.rows) + sum(t.num_rows for t in self.tables)

    @property
    def rows_in(self) -> int:
        return self.good + self.counted + self.copies + len(self.bad)

    def take(self, result: Result, seen: set[tuple[Any, datetime]], key: int, time: int
             ) -> None:
        """One record's verdict into the batch: a dead letter, a copy of a (key, time) in
        ``seen`` already (the first is kept), or a row."""
        row, bad, extra = result
        self.extra += int(extra)
        if bad is not None:
            self.bad.append(bad)
            return
        assert row is not None
        identity = (row[key], row[time])
        if identity in seen:
            self.copies += 1
            return
        seen.add(identity)
        self.rows.append(row)
        self.newest(row[time])

    def newest(self, ts: datetime | None) -> None:
        if ts is not None and (self.max_ts is None or ts > self.max_ts):
            self.max_ts = ts


# one record: (row, None, extra) or (None, dead letter, extra); extra: it carried fields the
# stream neither declares nor keeps
Result = tuple[tuple[Any, ...] | None, DeadLetter | None, bool]


class BadValue(Exception):
    """A value the column cannot hold; the message is the dead letter's detail."""


class BadEncoding(BadValue):
    """A value that is no Unicode text: it holds a lone surrogate (``bad_encoding``)."""


class Undecodable:
    """A Parquet string value that is not valid UTF-8: its exact bytes (``data``), shown as
    text with U+FFFD where the bytes are invalid."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __str__(self) -> str:
        return self.data.decode("utf-8", "replace")


class Unrepresentable:
    """A Parquet value Python cannot hold (a timestamp before year 1 or after 9999): its text as
    Arrow writes it; no column type takes it (``bad_ts`` in the time column, ``bad_type``
    elsewhere)."""

    def __init__(self, scalar: Any) -> None:
        import pyarrow as pa

        try:
            self.text = str(scalar.cast(pa.string()).as_py())
        except (pa.ArrowException, OverflowError, ValueError):
            self.text = f"a {scalar.type} value out of range"

    def __str__(self) -> str:
        return self.text


class Layout:
    """A stream's columns as the parser needs them: names in table order (``attrs`` last when
    the stream keeps extras), which are required, and one converter per column."""

    def __init__(self, stream: Stream, indexed: Iterable[str] = ()) -> None:
        self.stream = stream
        self.columns = stream.columns
        self.declared = frozenset(c.name for c in stream.columns)
        self.names: tuple[str, ...] = tuple(c.name for c in stream.columns) + (
            ("attrs",) if stream.keep_extra else ()
        )
        self.time_index = next(i for i, c in enumerate(stream.columns) if c.name == stream.time)
        self.key_index = next(i for i, c in enumerate(stream.columns) if c.name == stream.key)
        self.required = tuple(
            c.name for c in stream.columns
            if c.required or c.name in (stream.key, stream.time)
        )
        # text columns an index holds (the key always): at most MAX_KEY_CHARS characters
        held = {stream.key, *indexed}
        self.limited = frozenset(c.name for c in stream.columns
                                 if c.type == "text" and c.name in held)

    def record(self, values: dict[str, Any], source: str, raw: str,
               raw_bytes: bytes | None, limits: Limits,
               from_text: bool = False) -> Result:
        """(row, None, extra) or (None, dead letter, extra) for one record's fields."""
        extra_fields = {k: v for k, v in values.items() if k not in self.declared}
        extra = bool(extra_fields) and not self.stream.keep_extra

        def dead(reason: str, detail: str, ts: datetime | None = None) -> Result:
            return None, DeadLetter(source, reason, detail, raw, raw_bytes, ts), extra

        for name in self.required:
            if values.get(name) is None:
                return dead("missing_field", f"field {name} is missing or null")
        row: list[Any] = []
        for i, col in enumerate(self.columns):
            value = values.get(col.name)
            if value is None:
                row.append(None)
                continue
            try:
                row.append(convert(value, col.type, from_text=from_text))
                if col.name in self.limited:
                    _short(row[-1], col.name == self.stream.key)
            except BadEncoding as exc:
                return dead("bad_encoding", f"{col.name} ({col.type}): {exc}")
            except BadValue as exc:
                if i == self.time_index:
                    return dead("bad_ts", f"{col.name} is not a time: {exc}")
                return dead("bad_type", f"{col.name} ({col.type}): {exc}")
        ts = row[self.time_index]
        future, expired, late = limits.future_after, limits.expired_before, limits.late_before
        if future is not None and ts > future:
            return dead("future", f"{self.stream.time} {_iso(ts)} ahead of the clock", ts)
        if expired is not None and ts < expired:
            return dead("expired", f"{self.stream.time} {_iso(ts)} before the retention "
                        f"horizon {_iso(expired)}", ts)
        if late is not None and ts < late:
            return dead("late", f"{self.stream.time} {_iso(ts)} older than the watermark "
                        f"{_iso(late)}", ts)
        if self.stream.keep_extra:
            try:
                row.append(_jsonb(extra_fields, False) if extra_fields else None)
            except BadEncoding as exc:
                return dead("bad_encoding", f"attrs (fields not declared, jsonb): {exc}")
            except BadValue as exc:
                return dead("bad_type", f"attrs (fields not declared, jsonb): {exc}")
        return tuple(row), None, extra


def _short(text: str, key: bool) -> None:
    """BadValue when ``text`` is too long for the index that holds its column."""
    if len(text) > MAX_KEY_CHARS:
        what = "a key" if key else "a text column an index holds"
        raise BadValue(f"{len(text):,} characters, more than the {MAX_KEY_CHARS} {what} may "
                       "have (an index entry must fit in a page)")


def _iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


# -- values -------------------------------------------------------------------------------


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else render_json(value)
    return repr(text[:80] + ("..." if len(text) > 80 else "")) if isinstance(value, str) \
        else text[:80]


def convert(value: Any, type_: str, *, from_text: bool = False) -> Any:
    """``value`` (a JSON value with numbers as int/Decimal, a CSV string when ``from_text``,
    or a Parquet value) as the Python value of a column of ``type_``; BadValue if it cannot
    be one."""
    if type_ == "text":
        return _text(value)
    if type_ in INT_RANGES:
        return _integer(value, type_)
    if type_ == "double precision":
        return _double(value)
    if type_ == "numeric" or type_.startswith("numeric("):
        return _numeric(value, type_)
    if type_ == "boolean":
        return _boolean(value)
    if type_ == "timestamptz":
        return parse_time(value)
    if type_ == "jsonb":
        return _jsonb(value, from_text)
    raise BadValue(f"type {type_} is not one a stream holds")


def _text(value: Any) -> str:
    if isinstance(value, str):
        text = value
    elif isinstance(value, bool | int | float | Decimal):
        text = render_json(value)
    elif isinstance(value, datetime | date):
        text = value.isoformat()
    else:
        raise BadValue(f"{_shown(value)} is not text")
    _storable(text, "text")
    return text


def _storable(text: str, what: str) -> None:
    """BadValue when PostgreSQL cannot store ``text``: it holds NUL, or a lone surrogate
    (``json.loads`` makes one of the escape ``\\ud800`` not followed by a low half; UTF-8
    cannot encode it) -- BadEncoding then."""
    if NUL in text:
        raise BadValue(f"{what} holds a NUL character, which PostgreSQL cannot store")
    if not text.isascii() and (found := _SURROGATE.search(text)):
        raise BadEncoding(f"{what} holds a lone surrogate (\\u{ord(found.group()):04x}, half "
                          "of a UTF-16 pair), which is no character")


def _integer(value: Any, type_: str) -> int:
    if isinstance(value, bool):
        raise BadValue(f"{_shown(value)} is not an integer")
    if isinstance(value, int):
        n = value
    elif isinstance(value, Decimal | float):
        if not (math.isfinite(value) and value == int(value)):
            raise BadValue(f"{_shown(value)} is not an integer")
        n = int(value)
    elif isinstance(value, str) and _INTEGER.match(value):
        n = int(value)
    else:
        raise BadValue(f"{_shown(value)} is not an integer")
    low, high = INT_RANGES[type_]
    if not low <= n <= high:
        raise BadValue(f"{_shown(value)} is out of range for {type_}")
    return n


def _double(value: Any) -> float:
    if isinstance(value, bool):
        raise BadValue(f"{_shown(value)} is not a number")
    if isinstance(value, int | Decimal | float):
        x = float(value)
        if math.isinf(x) and not (isinstance(value, float)
                                  or isinstance(value, Decimal) and value.is_infinite()):
            raise BadValue(f"{_shown(value)} is out of range for double precision")
        return x
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _SPECIAL_DOUBLES:
            return _SPECIAL_DOUBLES[word]
        if _NUMBER.match(value):
            x = float(value)
            if math.isinf(x):
                raise BadValue(f"{_shown(value)} is out of range for double precision")
            return x
    raise BadValue(f"{_shown(value)} is not a number")


def _numeric(value: Any, type_: str) -> Decimal:
    if isinstance(value, bool):
        raise BadValue(f"{_shown(value)} is not a number")
    if isinstance(value, int):
        d = Decimal(value)
    elif isinstance(value, Decimal):
        d = value
    elif isinstance(value, float):
        d = Decimal(repr(value)) if math.isfinite(value) else Decimal(value)
    elif isinstance(value, str) and _NUMBER.match(value):
        d = Decimal(value.strip())
    else:
        raise BadValue(f"{_shown(value)} is not a number")
    if not d.is_finite():
        raise BadValue(f"{_shown(value)} is not a finite number")
    match = _NUMERIC_TYPE.match(type_)
    if match is None:  # unconstrained: PostgreSQL's own limits
        exponent = d.as_tuple().exponent
        assert isinstance(exponent, int)  # a finite number's
        if d and (d.adjusted() > _NUMERIC_MAX_EXP or exponent < _NUMERIC_MIN_EXP):
            raise BadValue(f"{_shown(value)} is out of range for numeric")
        return d
    precision, scale = int(match[1]), int(match[2])
    if d and d.adjusted() >= precision - scale + 1:  # clearly too many digits before the point
        raise BadValue(f"{_shown(value)} has more than {precision - scale} digits before the "
                       f"point ({type_})")
    with localcontext(_WIDE):
        try:
            rounded = d.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
        except InvalidOperation as exc:
            raise BadValue(f"{_shown(value)} does not fit {type_}") from exc
    if rounded and rounded.adjusted() >= precision - scale:
        raise BadValue(f"{_shown(value)} has more than {precision - scale} digits before the "
                       f"point ({type_})")
    return rounded


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
    raise BadValue(f"{_shown(value)} is not true or false")


def _jsonb(value: Any, from_text: bool) -> str:
    if from_text and isinstance(value, str):
        try:
            value = json.loads(value, parse_float=Decimal, parse_constant=_no_constant)
        except (ValueError, RecursionError) as exc:
            raise BadValue(f"{_shown(value)} is not JSON") from exc
    _json_storable(value)
    return render_json(value)


def _json_storable(value: Any) -> None:
    """BadValue when a string or a member's name in ``value`` holds NUL (jsonb cannot store
    \\u0000) or a lone surrogate; a loop, not recursion: a value may nest deep."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            _storable(item, "JSON")
        elif isinstance(item, dict):
            stack.extend(str(k) for k in item)
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


def _no_constant(word: str) -> Any:
    raise ValueError(f"{word} is not JSON")


def parse_time(value: Any) -> datetime:
    """An ISO-8601 string (naive = UTC) or an epoch number (``auto``: seconds below 1e11,
    milliseconds below 1e14, microseconds below 1e17, else nanoseconds; kept to the
    microsecond, cut toward the past), within years 0001-9999; BadValue otherwise."""
    if isinstance(value, datetime):
        t = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return _in_range(t.astimezone(UTC), value)
    if isinstance(value, bool):
        raise BadValue(f"{_shown(value)} is not a time")
    if isinstance(value, int | Decimal | float):
        return _from_epoch(value)
    if isinstance(value, str):
        text = value.strip()
        if _NUMBER.match(text) and ":" not in text:
            return _from_epoch(Decimal(text))
        if NUL in text:
            raise BadValue("the time holds a NUL character")
        try:
            t = datetime.fromisoformat(text)
        except ValueError as exc:
            raise BadValue(f"{_shown(value)} is neither ISO-8601 nor an epoch number") from exc
        if t.tzinfo is None:
            t = t.replace(tzinfo=UTC)
        try:
            return _in_range(t.astimezone(UTC), value)
        except OverflowError as exc:
            raise BadValue(f"{_shown(value)} is outside years 0001-9999") from exc
    raise BadValue(f"{_shown(value)} is not a time")


def _in_range(t: datetime, value: Any) -> datetime:
    if not MIN_TS <= t <= MAX_TS:
        raise BadValue(f"{_shown(value)} is outside years 0001-9999")
    return t


def _from_epoch(n: int | float | Decimal) -> datetime:
    if isinstance(n, float):
        if not math.isfinite(n):
            raise BadValue(f"{_shown(n)} is not a time")
        n = Decimal(repr(n))
    d = Decimal(n)
    per = None
    for bound, micros_per in AUTO_BOUNDS:
        if -bound < d < bound:
            per = Decimal(micros_per)
            break
    with localcontext(_WIDE):
        micros = math.floor(d * per) if per is not None else math.floor(d / 1000)
    try:
        t = _EPOCH + timedelta(microseconds=micros)
    except OverflowError as exc:
        raise BadValue(f"{_shown(n)} is outside years 0001-9999") from exc
    return _in_range(t, n)


def render_json(value: Any) -> str:
    """JSON text of a value whose numbers may be Decimals (written exactly), bytes (as
    ``\\x`` hex), dates and times (ISO-8601)."""
    out: list[str] = []
    _render(value, out)
    return "".join(out)


def _render(value: Any, out: list[str]) -> None:
    if value is None or isinstance(value, bool | str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(json.dumps(value) if math.isfinite(value) else json.dumps(str(value)))
    elif isinstance(value, Decimal):
        out.append(str(value) if value.is_finite() else json.dumps(str(value)))
    elif isinstance(value, dict):
        out.append("{")
        for i, (k, v) in enumerate(value.items()):
            out.append(", " if i else "")
            out.append(json.dumps(str(k), ensure_ascii=False) + ": ")
            _render(v, out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, v in enumerate(value):
            out.append(", " if i else "")
            _render(v, out)
        out.append("]")
    elif isinstance(value, bytes):
        out.append(json.dumps("\\x" + value.hex()))
    elif isinstance(value, datetime | date):
        out.append(json.dumps(value.isoformat()))
    else:
        out.append(json.dumps(str(value), ensure_ascii=False))


# -- files --------------------------------------------------------------------------------


def kind_of(name: str) -> str | None:
    """``json``, ``csv`` or ``parquet`` by the file's extension (any case), else None."""
    ext = PurePosixPath(name).suffix.lower().lstrip(".")
    if ext in JSON_EXTENSIONS:
        return "json"
    if ext in ("csv", "parquet"):
        return ext
    return None


def parse_files(layout: Layout, files: Iterable[tuple[str, bytes | str]],
                limits: Limits) -> Parsed:
    """Every record of the batch's files (name, content), in name order, as good rows or dead
    letters; a (key, time) seen before in the batch is dropped and counted in ``copies``."""
    parsed, seen = Parsed(), set[tuple[Any, datetime]]()
    ki, ti = layout.key_index, layout.time_index
    for name, content in sorted(files, key=lambda f: f[0]):
        if isinstance(content, str):  # an entry nobody may open: content says why
            parsed.bad.append(DeadLetter(name, "unreadable_file", f"{content}; never opened",
                                         clean_text(name)[0]))
            continue
        for result in parse_file(layout, name, content, limits, parsed):
            parsed.take(result, seen, ki, ti)
    return parsed


def parse_file(layout: Layout, name: str, content: bytes, limits: Limits,
               into: Parsed | None = None) -> Iterator[Result]:
    kind = kind_of(name)
    if kind == "json":
        yield from _json_records(layout, name, content, limits)
    elif kind == "csv":
        yield from _csv_records(layout, name, content, limits)
    elif kind == "parquet":
        yield from _parquet_records(layout, name, content, limits, into)
    else:
        yield None, DeadLetter(name, "unreadable_file", "not a .jsonl, .ndjson, .json, .csv or "
                               ".parquet file", clean_text(name)[0]), False


def clean_text(data: bytes | str) -> tuple[str, bytes | None]:
    """(text PostgreSQL can hold, the exact bytes when that text is not them). A lone
    surrogate in ``data`` (text) is shown as U+FFFD, its bytes kept as Python encodes it."""
    if isinstance(data, str):
        text, exact = data, None
        if NUL in text or not text.isascii() and _SURROGATE.search(text):
            exact = text.encode("utf-8", "surrogatepass")
            text = _SURROGATE.sub("\ufffd", text)
    else:
        try:
            text, exact = data.decode("utf-8"), None
        except UnicodeDecodeError:
            text, exact = data.decode("utf-8", "replace"), data
        if NUL in text and exact is None:
            exact = data
    return text.replace(NUL, "\\0"), exact


def _json_records(layout: Layout, name: str, content: bytes, limits: Limits) -> Iterator[Result]:
    if content.startswith(BOM):  # as a CSV file's (utf-8-sig): no part of the first line
        content = content[len(BOM):]
    for line in content.splitlines():
        result = json_line(layout, name, line, limits)
        if result is not None:
            yield result


def json_line(layout: Layout, name: str, line: bytes, limits: Limits) -> Result | None:
    """One JSON Lines record of file ``name`` (None: a blank line, which holds none)."""
    if not line.strip():
        return None
    raw, exact = clean_text(line)
    text = _decoded(name, line)
    if not isinstance(text, str):
        return text
    try:
        value = json.loads(text, parse_float=Decimal, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        return None, DeadLetter(name, "malformed", f"not JSON: {exc}", raw, exact), False
    if not isinstance(value, dict):
        return None, DeadLetter(name, "malformed", "not a JSON object", raw, exact), False
    return layout.record(value, name, raw, exact, limits)


def _csv_records(layout: Layout, name: str, content: bytes, limits: Limits) -> Iterator[Result]:
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError:
        raw, exact = clean_text(content)
        yield None, DeadLetter(name, "bad_encoding", "file is not valid UTF-8 (its exact bytes "
                               "are in raw_bytes)", raw, exact), False
        return
    source = _Tracked(text.splitlines(keepends=True))
    reader = csv.reader(source, strict=True)
    header: list[str] | None = None
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            rest = source.consumed_text()
            raw, exact = clean_text(rest.rstrip("\r\n"))
            yield None, DeadLetter(name, "malformed", f"not CSV: {exc}", raw, exact), False
            if "unexpected end of data" in str(exc) or source.done:
                return
            continue
        record = source.consumed_text().rstrip("\r\n")
        if not fields or all(not f.strip() for f in fields) and len(fields) <= 1:
            continue  # a blank line
        if header is None:
            header = [f.strip() for f in fields]
            twice = _named_twice(header)
            if twice is not None:
                raw, exact = clean_text(content)
                yield None, DeadLetter(name, "malformed", f"the header names column {twice!r} "
                                       "more than once: name each column once (which one "
                                       "would be read is a guess)", raw, exact), False
                return
            continue
        yield csv_fields(layout, name, header, fields, record, limits)


def csv_fields(layout: Layout, name: str, header: Sequence[str], fields: Sequence[str],
               record: str, limits: Limits) -> Result:
    """One CSV record (its ``fields``, and its text as written) under the file's header."""
    raw, exact = clean_text(record)
    if len(fields) > len(header):
        return None, DeadLetter(name, "malformed", f"{len(fields)} fields but the header "
                                f"names {len(header)}", raw, exact), False
    values = {h: (f if f != "" else None) for h, f in zip(header, fields, strict=False)}
    return layout.record(values, name, raw, exact, limits, from_text=True)


def _decoded(name: str, line: bytes) -> str | Result:
    """The line as text, or its ``bad_encoding`` dead letter when it is not UTF-8."""
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        raw, exact = clean_text(line)
        return None, DeadLetter(name, "bad_encoding", "line is not valid UTF-8 (its exact "
                                "bytes are in raw_bytes)", raw, exact), False


def csv_line(layout: Layout, name: str, header: Sequence[str], line: bytes,
             limits: Limits) -> Result | None:
    """One line of a CSV file whose records each fit on a line, read alone under the file's
    header (None: a blank line), as ``_csv_records`` reads it."""
    text = _decoded(name, line)
    if not isinstance(text, str):
        return text
    try:
        fields = next(csv.reader([text], strict=True), [])
    except csv.Error as exc:
        raw, exact = clean_text(text)
        return None, DeadLetter(name, "malformed", f"not CSV: {exc}", raw, exact), False
    if not fields or all(not f.strip() for f in fields) and len(fields) <= 1:
        return None
    return csv_fields(layout, name, header, fields, text, limits)


def _named_twice(header: Sequence[str]) -> str | None:
    """The first column name ``header`` holds more than once, if any."""
    seen: set[str] = set()
    for name in header:
        if name in seen:
            return name
        seen.add(name)
    return None


class _Tracked:
    """Lines fed to ``csv.reader`` that remembers which lines the last record consumed, so a
    dead letter holds the record's own text (RFC 4180: one record may span lines)."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines, self.pos, self.mark = lines, 0, 0

    def __iter__(self) -> _Tracked:
        return self

    def __next__(self) -> str:
        if self.pos >= len(self.lines):
            raise StopIteration
        self.pos += 1
        return self.lines[self.pos - 1]

    @property
    def done(self) -> bool:
        return self.pos >= len(self.lines)

    def consumed_text(self) -> str:
        text = "".join(self.lines[self.mark:self.pos])
        self.mark = self.pos
        return text


def _parquet_records(layout: Layout, name: str, content: bytes,
                     limits: Limits, into: Parsed | None = None) -> Iterator[Result]:
    """The file's records; with ``into``, its good rows go there whole when the fast path
    (``ingest.typed_arrow``) can take the file, and only the others are yielded."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(content))
    except Exception as exc:  # any file pyarrow cannot read is one dead letter
        yield None, DeadLetter(name, "malformed", f"not a Parquet file pyarrow can read: "
                               f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
                               f"(Parquet file {name}, {len(content)} bytes)"), False
        return
    if into is not None:
        from slidewin.ingest.typed_arrow import split

        whole = split(layout, table, limits)
        if whole is not None:
            if whole.good.num_rows:
                into.tables.append(whole.good)
                into.extra += whole.good.num_rows if whole.extra else 0
                newest = pc_max(whole.good.column(layout.stream.time))
                into.newest(newest)
            for values in whole.rest:
                yield parquet_row(layout, name, values, limits)
            return
    for batch in table.to_batches():
        for values in pylist(batch):
            yield parquet_row(layout, name, values, limits)


def parquet_row(layout: Layout, name: str, values: dict[str, Any],
                    limits: Limits) -> Result:
    """One Parquet row; a string that is not UTF-8 in a column the stream stores is
    ``bad_encoding`` (its bytes in ``raw_bytes``, as the built-in stream keeps a uuid's)."""
    undecodable = [k for k, v in values.items() if isinstance(v, Undecodable)]
    raw, exact = clean_text(render_json(values))
    for key in undecodable:
        if key in layout.declared or layout.stream.keep_extra:
            data = values[key].data
            return None, DeadLetter(name, "bad_encoding", f"{key} is not valid UTF-8 (its "
                                    "exact bytes are in raw_bytes)", raw, data), False
        values[key] = str(values[key])  # a column dropped anyway: counted in extra
    return layout.record(values, name, raw, exact, limits)


def pylist(batch: Any) -> list[dict[str, Any]]:
    """The batch's rows as dicts, as ``to_pylist`` makes them; where pyarrow cannot (a string
    that is not valid UTF-8), that column value by value, such a value ``Undecodable``."""
    try:
        return batch.to_pylist()
    except (UnicodeDecodeError, OverflowError, ValueError):
        pass
    columns = {}
    for col_name, column in zip(batch.schema.names, batch.columns, strict=True):
        try:
            columns[col_name] = column.to_pylist()
        except (UnicodeDecodeError, OverflowError, ValueError):
            columns[col_name] = [_value(column[i]) for i in range(len(column))]
    return [{k: v[i] for k, v in columns.items()} for i in range(batch.num_rows)]


def _value(scalar: Any) -> Any:
    """A scalar's Python value; ``Undecodable`` when it is a string that is not UTF-8 (its
    bytes), or a nested value holding one (its JSON text, strings as ``\\x`` hex);
    ``Unrepresentable`` when Python has no such value."""
    import pyarrow as pa

    try:
        return scalar.as_py()
    except UnicodeDecodeError:  # (a ValueError: before the clause below)
        if pa.types.is_string(scalar.type) or pa.types.is_large_string(scalar.type):
            return Undecodable(scalar.cast(pa.binary()).as_py())
        try:
            value = scalar.cast(_as_binary(scalar.type)).as_py()
        except (pa.ArrowException, UnicodeDecodeError):
            return Undecodable(b"")
        return Undecodable(render_json(value).encode())
    except (OverflowError, ValueError):  # a time Python's datetime cannot hold (146000 BC)
        return Unrepresentable(scalar)


def _as_binary(type_: Any) -> Any:
    """``type_`` with every string type inside it made binary."""
    import pyarrow as pa

    if pa.types.is_string(type_):
        return pa.binary()
    if pa.types.is_large_string(type_):
        return pa.large_binary()
    if pa.types.is_list(type_):
        return pa.list_(_as_binary(type_.value_type))
    if pa.types.is_large_list(type_):
        return pa.large_list(_as_binary(type_.value_type))
    if pa.types.is_struct(type_):
        return pa.struct([type_.field(i).with_type(_as_binary(type_.field(i).type))
                          for i in range(type_.num_fields)])
    if pa.types.is_map(type_):
        return pa.map_(_as_binary(type_.key_type), _as_binary(type_.item_type))
    return type_


def pc_max(column: Any) -> datetime | None:
    import pyarrow.compute as pc

    value = pc.max(column).as_py()
    return value if isinstance(value, datetime) else None
