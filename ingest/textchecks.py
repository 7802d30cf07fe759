"""Checks of a text line that need more than its parsed fields: whether a JSON uuid was a string
(or an integer) at all, whether it held a lone surrogate, whether a JSON object carried members
beyond uuid, val and ts, which field made the JSON parser refuse a line for its length, and
whether a CSV line is a header other than ``uuid,val,ts``.

All are cheap on the common path: a test of the parsed text or of the line's bytes that holds
for few rows, and the dear part (a second parse, a regular expression) only for those.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

# Jackson's default StreamReadConstraints: a longer string fails the whole line
JSON_MAX_STRING = 20_000_000
# the member whose string value is that long (a run of as many characters, none a quote)
LONG_STRING = r'"([^"]{1,200})"\s*:\s*"[^"]{' + str(JSON_MAX_STRING) + "}"
NOT_A_KEY = "uuid must be a JSON string or an integer"
# the bytes around three values: {"uuid":,"val":,"ts":} is 22 (values that are numbers), and
# one member more adds at least 5 (,"":0); a line with quoted values and no space ({"uuid":"k",
# "val":1,"ts":"t"}, 26 bytes around them) is never counted
_SYNTAX = 26
KEY_KINDS = r"^(STRING|TINYINT|SMALLINT|INT|BIGINT|DECIMAL\(\d+,0\))$"  # schema_of_variant's
# the string of the member "uuid" as written (escapes and all); possessive, so a long string
# costs no stack
UUID_MEMBER = r'"uuid"\s*+:\s*+"((?:[^"\\]++|\\.)*+)"'
# the escape of one half of a UTF-16 pair without its other half: a high half not followed by
# a low half's escape, or a low half not after a high half's; an escape is a "\u" after an even
# run of backslashes (``\\ud800`` is a backslash and the text "ud800")
LONE_SURROGATE = (
    r"(?i)(?<!\\)(?:\\\\)*+\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f][0-9a-f]{2})"
    r"|(?<!\\ud[89ab][0-9a-f]{2})(?<!\\)(?:\\\\)*+\\ud[c-f][0-9a-f]{2}"
)
LONE_SURROGATE_DETAIL = (
    "uuid holds a lone surrogate (an escape \\ud800-\\udfff without its other half), which is "
    "no character: stored, it would become a '?'"
)
_UUID_BYTES = 800  # 200 characters of at most 4 bytes: a longer uuid is bad_uuid anyway
# a CSV line of column names only (quoted or not), the first of them a name twice
HEADER_LIKE = r'(?i)^[\s\ufeff"]*(uuid|val|ts)[\s"]*(,[\s"]*(uuid|val|ts)[\s"]*)+$'
NAMED_TWICE = r"(?i)\b(uuid|val|ts)\b.*\b\1\b"


def count(text: Column, char: str) -> Column:
    """How many times the one-byte ``char`` occurs in ``text`` (bytes need no scan to count)."""
    return F.octet_length(text) - F.octet_length(F.replace(text, F.lit(char), F.lit("")))


def not_a_key(uuid: Column, raw: Column) -> Column:
    """A JSON uuid that is an object, an array, a boolean or a number with a fraction.

    Spark's JSON reader hands any value to a string field as its JSON text, so ``{"a":1}`` and
    ``true`` would be keys, and ``1.5e3`` the key ``1500.0`` -- text the producer never sent.
    The one rule: a key is a JSON string, or an integer (its digits, as a CSV key is). The
    parsed text tells which rows may be something else: it starts with ``{`` or ``[``, is a
    boolean, or is short and holds a ``.``, as Java renders every other number (``1500.0``,
    ``1.0E20``: at most 24 characters; ``Infinity`` past a double's range). Only those lines
    are parsed again, as a variant, which knows what the value was. The tests are ordered so
    that a usual key (a 36-character uuid) costs a few comparisons of its first byte and its
    length, never a scan."""
    suspect = (
        uuid.startswith("{") | uuid.startswith("[")
        | uuid.isin("true", "false", "Infinity", "-Infinity")
        | ((F.octet_length(uuid) <= F.lit(24)) & uuid.contains("."))
    )
    kind = F.schema_of_variant(F.try_variant_get(F.try_parse_json(raw), "$.uuid", "variant"))
    # a line the variant parser refuses (a key twice) tells nothing: not refused for that
    return suspect & ~F.coalesce(kind.rlike(KEY_KINDS), F.lit(True))


def lone_surrogate(uuid: Column, raw: Column) -> Column:
    """A JSON uuid that held a lone surrogate (``"a\\ud800"``): no character, which Spark turns
    into ``?`` -- a key the producer never sent. Only a uuid holding ``?`` in a line holding
    ``\\u`` is looked at closer: the uuid member as written (the whole line, when the member's
    name is itself escaped) is searched for such an escape."""
    suspect = (uuid.contains("?") & raw.contains("\\u")
               & (F.octet_length(uuid) <= F.lit(_UUID_BYTES)))
    member = F.regexp_extract(raw, UUID_MEMBER, 1)
    written = F.when(member == F.lit(""), raw).otherwise(member)
    return F.when(suspect, written.rlike(LONE_SURROGATE)).otherwise(F.lit(False))


def odd_header(raw: Column) -> tuple[Column, Column]:
    """(condition, detail) of a CSV line made of the names uuid, val and ts that is not the
    header ``uuid,val,ts`` (skipped before): a name twice, or another order. The built-in
    stream's CSV columns are uuid, val, ts by position; such a header says the file means
    something else. The regular expression only for lines whose first character can start
    one."""
    first = F.substring(F.ltrim(raw), 1, 1)
    maybe = first.isin("u", "U", "v", "V", "t", "T", '"', "\ufeff")
    cond = F.when(maybe, raw.rlike(HEADER_LIKE)).otherwise(F.lit(False))
    twice = F.lower(F.regexp_extract(raw, NAMED_TWICE, 1))
    fix = "the built-in stream's CSV columns are uuid,val,ts, in that order"
    detail = F.when(
        twice != F.lit(""),
        F.concat(F.lit("the header names column "), twice, F.lit(f" more than once: {fix}")),
    ).otherwise(F.lit(f"a header that is not uuid,val,ts: {fix}"))
    return cond, detail


def overlong_rule(field: Column) -> tuple[Column, Column, Column]:
    """The rule (condition, reason, detail) for a JSON line the parser refused because the
    string of member ``field`` (``overlong_field``) is longer than it reads: the reason is that
    field's (a uuid too long is ``bad_uuid``), the detail names it."""
    code = (
        F.when(field == F.lit("uuid"), F.lit("bad_uuid"))
        .when(field == F.lit("val"), F.lit("bad_type"))
        .when(field == F.lit("ts"), F.lit("bad_ts"))
        .when(field.isNotNull(), F.lit("malformed"))
    )
    beyond = f"a string of over {JSON_MAX_STRING:,} characters, more than the JSON parser reads"
    detail = F.when(
        field == F.lit("uuid"), F.lit(f"uuid longer than 200 characters: {beyond}")
    ).when(field.isNotNull(), F.concat(field, F.lit(f" holds {beyond}")))
    return field.isNotNull(), code, detail


def overlong_field(raw: Column) -> Column:
    """For a line the JSON parser refused, the name of the member whose string is longer than
    the parser reads (NULL when there is none), so the dead letter can name the field.

    Why not lift the parser's limit (``maxStringLen``): a parsed string costs about six bytes
    per character on the heap, in each of the two jobs that read a batch at once; a 21 MB key
    then took the ingest's JVM (1 GB) down, and the batch that holds it would do so again on
    every restart. Refused by the parser, the line costs what any long line costs."""
    long_line = F.octet_length(raw) > F.lit(JSON_MAX_STRING)
    return F.when(long_line, F.nullif(F.regexp_extract(raw, LONG_STRING, 1), F.lit("")))


def extra_members(raw: Column, uuid: Column, val: Column, ts: Column) -> Column:
    """A JSON object with members beyond uuid, val and ts (their values are dropped, so the
    batch counts such records).

    An object of those three has two commas outside its values, and the parsed values keep
    every comma they held (an object as uuid is rendered back with its own), so more commas
    than that in the line is another member -- a duplicate key included. Counting costs a
    copy of the line, so it is done only where the line is longer than its three values and
    ``_SYNTAX`` bytes around them -- a comparison of lengths Spark already knows: a compact
    line (what pandas and most JSON libraries write) is never counted; a line with spaces
    (Python's ``json.dumps``) or escapes is, and its commas decide. (Missed: a member beyond
    whose bytes are fewer than the ones JSON adds rendering a number, ``1e9`` as ``1.0E9``.)"""
    fields = (uuid, val, ts)
    values = [F.octet_length(c) for c in fields]  # NULL for a field missing: not counted
    longer = F.octet_length(raw) > values[0] + values[1] + values[2] + F.lit(_SYNTAX)
    inner = [F.when(c.contains(","), count(c, ",")).otherwise(F.lit(0)) for c in fields]
    # a CASE, not an AND: Spark computes an expression used twice in an AND for every row
    # (common subexpressions), and each count copies the line
    return F.when(longer, count(raw, ",") > inner[0] + inner[1] + inner[2] + F.lit(2)).otherwise(
        F.lit(False)
    )
