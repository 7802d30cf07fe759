"""Arrow rows -> PostgreSQL's binary COPY format, built with numpy (no per-row Python objects).

Why: for the raw rows, text COPY costs twice -- pyarrow formats every timestamp as text and
PostgreSQL parses it back. Binary COPY sends ``timestamptz`` as its 8-byte integer, so both the
driver's formatting and the server's parsing go away.

Format (PostgreSQL docs, "COPY ... BINARY"): a 19-byte header; per row an int16 field count, then
per field an int32 byte length and the value in network byte order (int2, text as UTF-8, int8,
timestamptz as microseconds since 2000-01-01 UTC); an int16 -1 trailer.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
TRAILER = b"\xff\xff"
PG_EPOCH_US = 946_684_800_000_000  # 2000-01-01 00:00:00 UTC in Unix microseconds

# per row: field count, part (length + int2), uuid length -- then the uuid's bytes -- then
# val (length + int8), ts (length + int8)
_HEAD = np.dtype([("fields", ">i2"), ("part_len", ">i4"), ("part", ">i2"), ("uuid_len", ">i4")])
_TAIL = np.dtype([("val_len", ">i4"), ("val", ">i8"), ("ts_len", ">i4"), ("ts", ">i8")])


def encode_events(rows: pa.Table) -> bytes:
    """``part int16, uuid string, val int64, ts timestamp`` (no NULLs) -> one COPY payload for
    ``COPY ... (part, uuid, val, ts) FROM STDIN (FORMAT binary)``."""
    n = rows.num_rows
    if any(rows[c].null_count for c in ("part", "uuid", "val", "ts")):
        raise ValueError("binary COPY of events: a NULL in part, uuid, val or ts")
    uuid = pc.cast(rows["uuid"], pa.large_string()).combine_chunks()
    offsets = np.frombuffer(uuid.buffers()[1], np.int64, n + 1, uuid.offset * 8)
    data = np.frombuffer(uuid.buffers()[2], np.uint8, offsets[-1] - offsets[0], offsets[0])
    lengths = np.diff(offsets)

    head = np.empty(n, _HEAD)
    head["fields"], head["part_len"], head["uuid_len"] = 4, 2, lengths
    head["part"] = rows["part"].to_numpy()
    tail = np.empty(n, _TAIL)
    tail["val_len"], tail["ts_len"] = 8, 8
    tail["val"] = rows["val"].to_numpy()
    micros = pc.cast(pc.cast(rows["ts"], pa.timestamp("us", tz="UTC")), pa.int64())
    tail["ts"] = micros.to_numpy() - PG_EPOCH_US

    hsize, tsize = _HEAD.itemsize, _TAIL.itemsize
    out = np.empty(len(HEADER) + n * (hsize + tsize) + int(lengths.sum()) + len(TRAILER),
                   np.uint8)
    out[: len(HEADER)] = np.frombuffer(HEADER, np.uint8)
    out[-len(TRAILER):] = np.frombuffer(TRAILER, np.uint8)
    body = out[len(HEADER): -len(TRAILER)]
    if n and (lengths == lengths[0]).all():  # the usual case: one uuid length, a 2-D view
        grid = body.reshape(n, hsize + int(lengths[0]) + tsize)
        grid[:, :hsize] = head.view(np.uint8).reshape(n, hsize)
        grid[:, hsize: hsize + int(lengths[0])] = data.reshape(n, int(lengths[0]))
        grid[:, hsize + int(lengths[0]):] = tail.view(np.uint8).reshape(n, tsize)
    elif n:
        starts = np.zeros(n, np.int64)
        np.cumsum(hsize + tsize + lengths[:-1], out=starts[1:])
        body[(starts[:, None] + np.arange(hsize)).ravel()] = head.view(np.uint8)
        text_at = np.repeat(starts + hsize - (offsets[:-1] - offsets[0]), lengths)
        body[text_at + np.arange(len(data))] = data
        body[((starts + hsize + lengths)[:, None] + np.arange(tsize)).ravel()] = tail.view(
            np.uint8)
    return out.tobytes()


# -- any declared stream's columns ----------------------------------------------------------

_FIXED = {"bigint": ">i8", "integer": ">i4", "double precision": ">f8", "boolean": "u1",
          "timestamptz": ">i8"}
_NUMERIC_DIGITS = 18  # numeric(p,s) is sent in binary when p, padded to whole base-10000
# digits after the point, stays within int64


class _Field:
    """One column's binary fields: each row's payload length (-1: NULL) and how to write the
    payloads (``write(body, starts)``, the payloads' offsets in ``body`` for every row)."""

    def __init__(self, lengths: np.ndarray, write) -> None:
        self.lengths, self.write = lengths, write


def encode_table(table: pa.Table, types: list[str]) -> bytes | None:
    """A declared stream's rows (``types``: each column's PostgreSQL type) as one binary COPY
    payload, or None when a column's type is not sent in binary here (the caller falls back to
    CSV): text, bigint, integer, double precision, boolean, timestamptz, numeric(p,s) with
    p + the padding of s to a multiple of 4 at most 18, and any column that is all NULL."""
    n = table.num_rows
    fields = []
    for column, type_ in zip(table.columns, types, strict=True):
        field = _field(column.combine_chunks(), type_, n)
        if field is None:
            return None
        fields.append(field)
    lengths = np.stack([f.lengths for f in fields], axis=1) if n else np.zeros((0, len(fields)))
    sizes = 4 + np.maximum(lengths, 0).astype(np.int64)
    row_sizes = 2 + sizes.sum(axis=1)
    starts = np.zeros(n, np.int64)
    if n:
        np.cumsum(row_sizes[:-1], out=starts[1:])
    out = np.empty(len(HEADER) + int(row_sizes.sum()) + len(TRAILER), np.uint8)
    out[: len(HEADER)] = np.frombuffer(HEADER, np.uint8)
    out[len(out) - len(TRAILER):] = np.frombuffer(TRAILER, np.uint8)
    body = out[len(HEADER): len(out) - len(TRAILER)]
    _scatter(body, starts, np.full(n, len(fields), ">i2").view(np.uint8).reshape(n, 2))
    at = starts + 2
    for c, field in enumerate(fields):
        _scatter(body, at, lengths[:, c].astype(">i4").view(np.uint8).reshape(n, 4))
        present = field.lengths >= 0
        field.write(body, (at + 4)[present], present)
        at = at + sizes[:, c]
    return out.tobytes()


def _scatter(body: np.ndarray, starts: np.ndarray, rows: np.ndarray) -> None:
    """Write row i of ``rows`` (n x w bytes) at ``body[starts[i]:starts[i] + w]``."""
    if len(starts):
        body[(starts[:, None] + np.arange(rows.shape[1])).ravel()] = rows.ravel()


def _field(column: pa.Array, type_: str, n: int) -> _Field | None:
    if column.null_count == n:
        return _Field(np.full(n, -1, np.int32), lambda body, starts, present: None)
    lengths = np.where(column.is_valid().to_numpy(zero_copy_only=False), 0, -1).astype(np.int32)
    if type_ == "text":
        return _text(column, lengths)
    if type_ in _FIXED:
        values = _fixed_values(column, type_)
        width = np.dtype(_FIXED[type_]).itemsize
        lengths[lengths == 0] = width

        def write(body, starts, present, v=values, w=width):
            _scatter(body, starts, v[present].view(np.uint8).reshape(-1, w))
        return _Field(lengths, write)
    if pa.types.is_decimal(column.type):
        return _numeric(column, lengths)
    return None


def _fixed_values(column: pa.Array, type_: str) -> np.ndarray:
    if type_ == "timestamptz":
        micros = pc.cast(pc.cast(column, pa.timestamp("us", tz="UTC")), pa.int64())
        values = pc.fill_null(micros, 0).to_numpy() - PG_EPOCH_US
    elif type_ == "boolean":
        values = pc.fill_null(column, False).to_numpy(zero_copy_only=False)
    else:
        values = pc.fill_null(column, 0).to_numpy()
    return np.ascontiguousarray(values.astype(_FIXED[type_]))


def _text(column: pa.Array, lengths: np.ndarray) -> _Field:
    text = pc.cast(pc.fill_null(column, ""), pa.large_string())
    n = len(text)
    offsets = np.frombuffer(text.buffers()[1], np.int64, n + 1, text.offset * 8)
    data = np.frombuffer(text.buffers()[2], np.uint8, offsets[-1] - offsets[0], offsets[0])
    sizes = np.diff(offsets)
    lengths[lengths == 0] = sizes[lengths == 0]

    def write(body, starts, present):
        first, size = offsets[:-1][present] - offsets[0], sizes[present]
        if not len(size):
            return
        ranks = _ranks(size)
        body[np.repeat(starts, size) + ranks] = data[np.repeat(first, size) + ranks]
    return _Field(lengths, write)


def _ranks(sizes: np.ndarray) -> np.ndarray:
    """0, 1, ..., s-1 for each s of ``sizes``, concatenated."""
    total = int(sizes.sum())
    ends = np.cumsum(sizes)
    return np.arange(total) - np.repeat(ends - sizes, sizes)


def _numeric(column: pa.Array, lengths: np.ndarray) -> _Field | None:
    """numeric(p,s) in PostgreSQL's binary form: base-10000 digits, a weight, a sign and the
    display scale -- from the decimal's unscaled 64-bit value, its point moved to a whole
    base-10000 digit (``pad``)."""
    precision, scale = column.type.precision, column.type.scale
    pad = (-scale) % 4
    if precision + pad > _NUMERIC_DIGITS or not pa.types.is_decimal128(column.type):
        return None
    n = len(column)
    words = np.frombuffer(column.buffers()[1], np.int64, 2 * n, column.offset * 16)
    unscaled = np.where(lengths >= 0, words[0::2], 0)
    digits = -(-(precision + pad) // 4)
    magnitude = np.abs(unscaled).astype(np.uint64) * np.uint64(10**pad)
    grid = np.empty((n, 4 + digits), ">i2")
    grid[:, 0] = digits
    grid[:, 1] = digits - 1 - (scale + pad) // 4
    grid[:, 2] = np.where(unscaled < 0, 0x4000, 0).astype(np.int16)
    grid[:, 3] = scale
    for i in range(digits):
        grid[:, 4 + i] = (magnitude // np.uint64(10_000 ** (digits - 1 - i))) % np.uint64(10_000)
    width = 2 * (4 + digits)
    lengths[lengths == 0] = width

    def write(body, starts, present):
        _scatter(body, starts, grid[present].view(np.uint8).reshape(-1, width))
    return _Field(lengths, write)
