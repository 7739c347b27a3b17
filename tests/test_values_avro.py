"""pykbatch.values offline: Avro datums written by fastavro (the reference Python implementation,
also what confluent-kafka's AvroSerializer writes with) decoded natively into Arrow, field by field
equal to what fastavro reads back -- for every Avro type, two evolutions of the schema, and every
fault a value can have, each a culprit with its rule and byte while its neighbours decode."""
from __future__ import annotations

import datetime
import io
import json
import struct
import uuid

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pykbatch import _native
from pykbatch.values import avro_schema
from pykbatch.values.decode import decode_avro, decode_values
from tests.avro_zoo import BID, ZOO_V1, ZOO_V2, ZOO_V3, bids, zoo_records

fastavro = pytest.importorskip("fastavro")


def datum(schema, record) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(json.loads(json.dumps(schema))), record)
    return out.getvalue()


def framed(schema_id: int, schema, record) -> bytes:
    return b"\0" + struct.pack(">I", schema_id) + datum(schema, record)


def fastavro_read(data: bytes, writer, reader=None):
    w = fastavro.parse_schema(json.loads(json.dumps(writer)))
    r = fastavro.parse_schema(json.loads(json.dumps(reader))) if reader is not None else None
    return fastavro.schemaless_reader(io.BytesIO(data), w, r)


def normal(v):
    """Arrow's Python values and fastavro's on common ground: maps as dicts, UUIDs as text."""
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, dict):
        return {k: normal(x) for k, x in v.items()}
    if isinstance(v, list):
        return [normal(x) for x in v]
    if isinstance(v, datetime.datetime) and v.tzinfo is not None:
        return v.astimezone(datetime.timezone.utc)
    return v


def assert_rows_equal(got: list, want: list):
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = normal(g), normal(w)
        if isinstance(w, dict):
            assert set(g) == set(w), k
            for name in w:
                assert g[name] == w[name], (k, name, g[name], w[name])
        else:
            assert g == w, k


def test_every_avro_type_decodes_as_fastavro_reads_it():
    records = zoo_records(16)
    values = [datum(ZOO_V1, r) for r in records]
    got = decode_avro(values, json.dumps(ZOO_V1))
    assert got.ok, got.culprits
    got.values.validate(full=True)
    assert_rows_equal(got.values.to_pylist(maps_as_pydicts="strict"), [fastavro_read(v, ZOO_V1) for v in values])


def test_the_arrow_types_follow_the_logical_types():
    t = decode_avro([datum(ZOO_V1, zoo_records(1)[0])], ZOO_V1).values.type
    by = {t.field(i).name: t.field(i).type for i in range(t.num_fields)}
    assert by["price"] == pa.decimal128(12, 3) and by["fixed_price"] == pa.decimal128(18, 2)
    assert by["day"] == pa.date32() and by["t_ms"] == pa.time32("ms") and by["t_us"] == pa.time64("us")
    assert by["ts_ms"] == pa.timestamp("ms", tz="UTC") and by["lts_us"] == pa.timestamp("us")
    assert by["kind"] == pa.dictionary(pa.int32(), pa.string()) and by["hash"] == pa.binary(4)
    assert by["scores"] == pa.map_(pa.string(), pa.int64()) and by["maybe"] == pa.string()
    assert pa.types.is_union(by["either"]) and by["n"] == pa.null()


@pytest.mark.parametrize("writer, reader", [(ZOO_V1, ZOO_V2), (ZOO_V2, ZOO_V3), (ZOO_V1, ZOO_V3)],
                         ids=["v1-as-v2", "v2-as-v3", "v1-as-v3"])
def test_schema_evolution_resolves_as_fastavro_does(writer, reader):
    records = zoo_records(16)
    if writer is ZOO_V2:
        records = [fastavro_read(datum(ZOO_V1, r), ZOO_V1, ZOO_V2) for r in records]
        for k, r in enumerate(records):
            r["kind"] = "ABCD"[k % 4]
            r["maybe"] = [None, "x", 7][k % 3]
    values = [datum(writer, r) for r in records]
    got = decode_avro(values, writer, reader_schema=reader)
    assert got.ok, got.culprits[:3]
    got.values.validate(full=True)
    assert_rows_equal(got.values.to_pylist(maps_as_pydicts="strict"), [fastavro_read(v, writer, reader) for v in values])


def test_several_writer_ids_land_in_one_column_of_the_reader_shape():
    values = [framed(1, ZOO_V1, r) for r in zoo_records(4)] + [framed(2, ZOO_V2, r)
                                                               for r in [fastavro_read(datum(ZOO_V1, x), ZOO_V1, ZOO_V2)
                                                                         for x in zoo_records(4)]]
    got = decode_values(values, {1: ZOO_V1, 2: ZOO_V2})  # no reader named: the newest id's schema
    assert got.ok and got.schema_ids.to_pylist() == [1] * 4 + [2] * 4
    want = [fastavro_read(v[5:], ZOO_V1, ZOO_V2) for v in values[:4]] + [fastavro_read(v[5:], ZOO_V2) for v in values[4:]]
    assert_rows_equal(got.values.to_pylist(maps_as_pydicts="strict"), want)
    # read as v1: v2 dropped "raw", which v1 has no default for -> v2's values are culprits, v1's decode
    pinned = decode_values(values, {1: ZOO_V1, 2: ZOO_V2}, reader_schema=ZOO_V1)
    assert [(c.row, c.rule) for c in pinned.culprits] == [(k, "value.schema_mismatch") for k in range(4, 8)]
    assert "Zoo.raw" in pinned.culprits[0].message and pinned.values.type.field("raw").type == pa.binary()
    assert pinned.values.to_pylist()[4:] == [None] * 4 and None not in pinned.values.to_pylist()[:4]


# ---- faults: one culprit each, with its rule and byte; neighbours decode ----

SIMPLE = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "s", "type": "string"},
    {"name": "u", "type": ["null", "int"]}, {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"]}},
    {"name": "a", "type": {"type": "array", "items": "null"}},
    {"name": "dec", "type": {"type": "fixed", "name": "D", "size": 20, "logicalType": "decimal", "precision": 30}},
]}
GOOD = {"id": 7, "s": "ok", "u": 3, "e": "Y", "a": [None], "dec": b"\0" * 20}
GOOD_BYTES = datum(SIMPLE, {**GOOD, "dec": __import__("decimal").Decimal(5)})
HEAD = b"\0\0\0\0\1"
# after the 5-byte header: id 7 -> 0e (byte 5); "ok" -> 04 6f 6b (6); union branch 1 -> 02, 3 -> 06 (9);
# enum 1 -> 02 (11); array of one null: 02 00 (12); the fixed(20) decimal (14)
ID_AT, S_AT, U_AT = 5, 6, 9


def _with(body: bytes) -> bytes:
    return HEAD + body


FAULTS = [
    ("value.schema_framing", b"\x07abcdef", 0),
    ("value.header_truncated", b"\0\0\0", 3),
    ("value.schema_unknown", b"\0\0\0\0\x09" + GOOD_BYTES, 1),
    ("value.datum_truncated", _with(GOOD_BYTES[:3]), 7),
    ("value.negative_length", _with(b"\x0e\x03ok"), S_AT),
    ("value.bad_varint", _with(b"\xff" * 11), ID_AT),
    ("value.invalid_utf8", _with(b"\x0e\x04\xc3\x28" + GOOD_BYTES[4:]), S_AT),
    ("value.union_index", _with(b"\x0e\x04ok\x04" + GOOD_BYTES[5:]), U_AT),
    ("value.enum_index", _with(GOOD_BYTES[:6] + b"\x04" + GOOD_BYTES[7:]), 11),
    ("value.too_many_items", _with(GOOD_BYTES[:7] + b"\xfe\xff\xff\xff\x0f\x00"), 12),
    ("value.decimal_overflow", _with(GOOD_BYTES[:9] + b"\x01" + b"\0" * 19), 14),
    ("value.trailing_bytes", _with(GOOD_BYTES + b"\0"), 5 + len(GOOD_BYTES)),
]


@pytest.mark.parametrize("rule, value, position", FAULTS, ids=[f[0] for f in FAULTS])
def test_each_fault_is_a_culprit_with_its_rule_and_byte(rule, value, position):
    good = _with(GOOD_BYTES)
    got = decode_values([good, value, None, good], {1: SIMPLE})
    assert [(c.row, c.rule, c.position) for c in got.culprits] == [(1, rule, position)], got.culprits
    c = got.culprits[0]
    assert c.code == 87 and c.message and "{" not in c.message
    rows = got.values.to_pylist(maps_as_pydicts="strict")
    assert rows[1] is None and rows[2] is None and rows[0] == rows[3] and rows[0]["id"] == 7
    assert got.values.null_count == 2


def test_a_union_branch_the_reader_lacks_fails_only_the_data_that_took_it():
    writer = {"type": "record", "name": "R", "fields": [{"name": "v", "type": ["int", "string"]}]}
    reader = {"type": "record", "name": "R", "fields": [{"name": "v", "type": ["null", "long"]}]}
    values = [datum(writer, {"v": 1}), datum(writer, {"v": "text"}), datum(writer, {"v": 2})]
    got = decode_avro(values, writer, reader_schema=reader)
    assert got.values.to_pylist(maps_as_pydicts="strict") == [{"v": 1}, None, {"v": 2}]
    [c] = got.culprits
    assert (c.row, c.rule) == (1, "value.schema_mismatch") and "string" in c.message


def test_a_reader_field_without_default_fails_every_datum_of_that_writer_with_the_reason():
    writer = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    reader = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "int"}]}
    got = decode_avro([datum(writer, {"a": 1})] * 3, writer, reader_schema=reader)
    assert [c.rule for c in got.culprits] == ["value.schema_mismatch"] * 3
    assert "R.b" in got.culprits[0].message and "no default" in got.culprits[0].message


def test_an_enum_symbol_the_reader_lacks_takes_its_default_or_is_a_culprit():
    w = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
    with_default = {"type": "enum", "name": "E", "symbols": ["A", "Z"], "default": "Z"}
    without = {"type": "enum", "name": "E", "symbols": ["A"]}
    values = [datum(w, "A"), datum(w, "B")]
    assert decode_avro(values, w, reader_schema=with_default).values.to_pylist() == ["A", "Z"]
    got = decode_avro(values, w, reader_schema=without)
    assert got.values.to_pylist(maps_as_pydicts="strict") == ["A", None] and "'B'" in got.culprits[0].message


def test_a_recursive_schema_is_refused_with_the_reason():
    node = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}
    with pytest.raises(avro_schema.SchemaError, match="recursive"):
        decode_avro([b"\0"], node)


def test_protobuf_message_indexes_and_the_zero_shortcut():
    assert _native.read_frame(b"\0\0\0\0\x05\x00payload", "confluent-protobuf") == (5, 6, [0])
    assert _native.read_frame(b"\0\0\0\0\x05\x04\x02\x06rest", "confluent-protobuf") == (5, 8, [1, 3])
    with pytest.raises(Exception, match="message index -1"):
        _native.read_frame(b"\0\0\0\0\x05\x01", "confluent-protobuf")
    with pytest.raises(Exception, match="shorter than"):
        _native.read_frame(b"\0\0\0\0\x05\x04\x02", "confluent-protobuf")


def test_a_key_column_of_a_table_decodes_and_culprits_name_it():
    table = pa.table({"key": pa.array([framed(3, "string", "k1"), b"bad"], pa.binary()),
                      "value": pa.array([b"", b""], pa.binary())})
    got = decode_values(table, {3: '"string"'}, column="key")
    assert got.values.to_pylist(maps_as_pydicts="strict") == ["k1", None] and got.culprits[0].column == "key"


def test_the_bid_decodes_from_kafka_record_bytes():
    from pykbatch import build_batch
    values = [framed(1, BID, b) for b in bids(50)]
    batch = build_batch([{"value": v} for v in values])
    got = decode_values(batch, {1: BID})
    assert got.ok and len(got.values) == 50
    assert_rows_equal(got.values.to_pylist(maps_as_pydicts="strict"), bids(50))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=64), st.integers(0, 200))
def test_hostile_bytes_never_crash_and_never_cost_a_neighbour(noise, cut):
    good = _with(GOOD_BYTES)
    zoo = framed(2, ZOO_V1, zoo_records(3)[2])
    values = [good, HEAD + noise, zoo[:cut], b"\0\0\0\0\2" + noise, good]
    got = decode_values(values, {1: SIMPLE, 2: ZOO_V1}, reader_schema=SIMPLE | {"fields": SIMPLE["fields"]})
    rows = got.values.to_pylist(maps_as_pydicts="strict")
    assert rows[0] == rows[4] and rows[0]["id"] == 7
    culprit_rows = {c.row for c in got.culprits}
    for k in (1, 2, 3):
        assert (rows[k] is None) == (k in culprit_rows) or rows[k] is not None
    got.values.validate(full=True)


# -- caches: a value never depends on which readers ran before in the process ------------------

CACHE_WRITER = {"type": "record", "name": "R", "namespace": "cache", "fields": [
    {"name": "a", "type": "int"}, {"name": "t", "type": "long"},
    {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["X", "Y"]}}]}


def _reader(fields, name="R", **extra):
    return {"type": "record", "name": name, "namespace": "cache", "fields": fields, **extra}


ENUM = {"type": "enum", "name": "K", "symbols": ["X", "Y"]}
T = {"name": "t", "type": "long"}
K = {"name": "kind", "type": ENUM}
# readers that differ from one another only in what the canonical form leaves out (aliases,
# defaults, logical types, names): each must read its own values whatever was compiled before it
CACHE_READERS = [
    _reader([{"name": "b", "type": "int", "default": -1}, T, K]),
    _reader([{"name": "b", "type": "int", "default": -1, "aliases": ["a"]}, T, K]),
    _reader([{"name": "b", "type": "int", "default": 7}, T, K]),
    _reader([{"name": "b", "type": "int", "default": 7, "aliases": ["a"]}, T, K]),
    _reader([{"name": "a", "type": "long"}, T, K]),
    _reader([{"name": "a", "type": "int"}, {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}}, K]),
    _reader([{"name": "a", "type": "int"}, {"name": "t", "type": {"type": "long", "logicalType": "timestamp-micros"}}, K]),
    _reader([{"name": "a", "type": "int"}, T, K], name="S", aliases=["R"]),
    _reader([{"name": "a", "type": "int"}, T, {"name": "kind", "type": {**ENUM, "name": "K2", "aliases": ["K"]}}]),
    _reader([{"name": "a", "type": "int"}, T, {"name": "kind", "type": {**ENUM, "symbols": ["Y", "X"]}}]),
    _reader([{"name": "a", "type": "int"}, T, {"name": "kind", "type": {**ENUM, "symbols": ["Y", "Z"], "default": "Z"}}]),
    _reader([{"name": "a", "type": "int"}, T, {"name": "kind", "type": {**ENUM, "symbols": ["Y", "Z"], "default": "Y"}}]),
    _reader([{"name": "a", "type": "int"}, T, K, {"name": "extra", "type": "string", "default": "one"}]),
    _reader([{"name": "a", "type": "int"}, T, K, {"name": "extra", "type": "string", "default": "two"}]),
]
CACHE_RECORDS = [{"a": 21, "t": 1_700_000_000_123, "kind": "X"}, {"a": -3, "t": 5, "kind": "Y"}]


def _read_all(reader) -> list:
    from pykbatch.values import decode_avro
    got = decode_avro([datum(CACHE_WRITER, r) for r in CACHE_RECORDS], json.dumps(CACHE_WRITER),
                      reader_schema=json.dumps(reader))
    culprits = {c.row for c in got.culprits}
    return [None if i in culprits else v for i, v in enumerate(got.values.to_pylist())]


def _fastavro_all(reader) -> list:
    out = []
    for r in CACHE_RECORDS:
        try:
            out.append(fastavro_read(datum(CACHE_WRITER, r), CACHE_WRITER, reader))
        except Exception:  # a symbol the reader lacks, without a default: no value
            out.append(None)
    return out


def _fresh(reader) -> list:
    """The reader's values with nothing compiled before it in the process."""
    from pykbatch.values import decode
    saved = dict(decode._LAYOUTS), dict(decode._PROGRAMS)
    decode._LAYOUTS.clear()
    decode._PROGRAMS.clear()
    try:
        return _read_all(reader)
    finally:
        decode._LAYOUTS.update(saved[0])
        decode._PROGRAMS.update(saved[1])


def test_each_cache_reader_reads_as_fastavro_when_alone():
    for reader in CACHE_READERS:
        logical = any(isinstance(f["type"], dict) and "logicalType" in f["type"] for f in reader["fields"])
        if not logical:  # fastavro reads the writer's plain long as a long whatever the reader says
            assert_rows_equal(_fresh(reader), _fastavro_all(reader))


@pytest.mark.parametrize("seed", range(4))
def test_many_readers_in_shuffled_orders_read_as_each_does_alone(seed):
    """One process, every reader in a shuffled order (seed printed), twice: the compiled-program
    and layout caches are keyed on everything resolution reads, so each reader gets its own --
    the values it gives when nothing ran before it."""
    import random
    alone = [_fresh(r) for r in CACHE_READERS]
    order = list(range(len(CACHE_READERS))) * 2
    random.Random(seed).shuffle(order)
    print(f"seed {seed}: {order}")
    for i in order:
        assert _read_all(CACHE_READERS[i]) == alone[i], (i, CACHE_READERS[i])


# -- edges read as Java's Avro reads them, or a culprit where it refuses ------------------------

def _one(writer, data: bytes, reader=None):
    from pykbatch.values import decode_avro
    got = decode_avro([data], json.dumps(writer), reader_schema=None if reader is None else json.dumps(reader))
    got.values.validate(full=True)  # never an array Arrow itself refuses
    return got.values.to_pylist()[0], [c.rule for c in got.culprits]


def _record(*fields):
    return {"type": "record", "name": "E", "fields": [{"name": n, "type": t} for n, t in fields]}


def test_a_fixed_of_size_zero_reads_as_empty_bytes():
    writer = _record(("a", "int"), ("z", {"type": "fixed", "name": "Z", "size": 0}))
    rec = {"a": 21, "z": b""}
    assert _one(writer, datum(writer, rec)) == (fastavro_read(datum(writer, rec), writer), [])


@pytest.mark.parametrize("precision, unscaled, fits", [
    (9, 10**12, False), (9, 10**9, False), (9, -(10**9), False), (9, 10**9 - 1, True), (9, -(10**9 - 1), True),
    (18, 10**18, False), (18, 10**18 - 1, True), (38, 10**38, False), (38, 10**38 - 1, True),
    (50, 10**50, False), (50, -(10**50 - 1), True), (76, 10**76 - 1, True), (4, 2**31, False), (4, 0, True)])
def test_a_decimal_with_more_digits_than_its_precision_is_a_culprit(precision, unscaled, fits):
    writer = _record(("d", {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": 2}))
    raw = unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)
    value, rules = _one(writer, bytes([2 * len(raw)]) + raw)
    assert (rules == []) == fits and (rules == ["value.decimal_overflow"]) == (not fits)
    if fits:
        import decimal
        with decimal.localcontext() as ctx:
            ctx.prec = 100
            assert value["d"].scaleb(2) == unscaled


def test_a_bytes_decimal_is_not_read_by_a_fixed_decimal_reader():
    decimal_type = {"logicalType": "decimal", "precision": 9, "scale": 2}
    writer = _record(("d", {"type": "bytes", **decimal_type}))
    reader = _record(("d", {"type": "fixed", "name": "F8", "size": 8, **decimal_type}))
    assert _one(writer, b"\x02\x05", reader) == (None, ["value.schema_mismatch"])  # Java: "Found bytes, expecting F8"
    assert _one(reader, bytes(7) + b"\x05", writer) == (None, ["value.schema_mismatch"])


@pytest.mark.parametrize("tenth, ok", [(0x00, True), (0x01, True), (0x02, False), (0x7f, False)])
def test_a_long_whose_tenth_byte_overflows_is_refused_as_an_int_is(tenth, ok):
    writer = _record(("l", "long"), ("i", "int"))
    value, rules = _one(writer, b"\xff" * 9 + bytes([tenth]) + b"\x02")
    assert (rules == []) == ok and (rules == ["value.bad_varint"]) == (not ok)
    if ok:
        assert value == {"l": fastavro_read(b"\xff" * 9 + bytes([tenth]) + b"\x02", writer)["l"], "i": 1}
    # the int's own rule: a fifth byte past 32 bits
    assert _one(_record(("i", "int")), b"\xff\xff\xff\xff\x7f")[1] == ["value.bad_varint"]


def _zigzag(n: int) -> bytes:
    z, out = (n << 1) ^ (n >> 63), bytearray()
    z &= 2**64 - 1
    while z >= 0x80:
        out.append(z & 0x7F | 0x80)
        z >>= 7
    return bytes(out + bytes([z]))


@pytest.mark.parametrize("logical, physical, day", [("time-millis", "int", 86_400_000),
                                                    ("time-micros", "long", 86_400_000_000)])
def test_a_time_of_day_outside_a_day_is_a_culprit(logical, physical, day):
    """Avro's time-millis / time-micros count from midnight: a value below 0 or a day or more
    (Java's TimeConversions throw; Spark's TIME cannot hold it, and Python's datetime.time fails
    on it) is value.time_of_day at its byte; the edges of a day decode; the field after it too."""
    writer = _record(("t", {"type": physical, "logicalType": logical}), ("after", "int"))
    for t, ok in ((0, True), (day - 1, True), (day, False), (-1, False), (2**31 - 1, physical == "long")):
        data = _zigzag(t) + b"\x0e"
        value, rules = _one(writer, data)
        assert (rules == []) == ok and (rules == ["value.time_of_day"]) == (not ok), (t, rules)
        if ok:
            assert value["after"] == 7
    got = decode_avro([_zigzag(day) + b"\x0e"], json.dumps(writer))
    c = got.culprits[0]
    assert (c.position, c.code) == (0, 87) and f"{day}" in c.message, c.message
