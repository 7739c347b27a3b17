"""A schema zoo: every Avro type and logical type, two evolutions of it, and records that reach
every branch -- for the decoder's tests against fastavro and confluent-kafka's serializers, and
for the benchmark's Nexmark-like bid."""
from __future__ import annotations

import datetime
import decimal
import uuid

UTC = datetime.timezone.utc

ADDRESS = {"type": "record", "name": "Address", "fields": [
    {"name": "street", "type": "string"},
    {"name": "zip", "type": ["null", "int"], "default": None},
]}

ZOO_V1 = {"type": "record", "name": "Zoo", "namespace": "pykbatch.test", "fields": [
    {"name": "n", "type": "null"},
    {"name": "flag", "type": "boolean"},
    {"name": "i", "type": "int"},
    {"name": "l", "type": "long"},
    {"name": "f", "type": "float"},
    {"name": "d", "type": "double"},
    {"name": "raw", "type": "bytes"},
    {"name": "s", "type": "string"},
    {"name": "home", "type": ADDRESS},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C"], "default": "A"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "scores", "type": {"type": "map", "values": "long"}},
    {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 4}},
    {"name": "maybe", "type": ["null", "string"], "default": None},
    {"name": "either", "type": ["int", "string", "Address", "null"]},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}},
    {"name": "fixed_price", "type": {"type": "fixed", "name": "Money", "size": 8, "logicalType": "decimal",
                                     "precision": 18, "scale": 2}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "t_ms", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "t_us", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "ts_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "ts_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "lts_ms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "lts_us", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
    {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "nested", "type": {"type": "array", "items": {"type": "map", "values": ["null", "Address"]}}},
    {"name": "matrix", "type": {"type": "array", "items": {"type": "array", "items": "double"}}},
]}

# Evolution 1 (backward compatible): a field removed (raw), fields added with defaults, int
# promoted to long, float to double, a symbol added to the enum, the union widened.
ZOO_V2 = {**ZOO_V1, "fields": [
    *[f for f in ZOO_V1["fields"] if f["name"] not in ("raw", "i", "f", "kind", "maybe")],
    {"name": "i", "type": "long"},
    {"name": "f", "type": "double"},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C", "D"], "default": "A"}},
    {"name": "maybe", "type": ["null", "string", "long"], "default": None},
    {"name": "added", "type": "string", "default": "fresh"},
    {"name": "added_rec", "type": ADDRESS | {"name": "Address2"}, "default": {"street": "none", "zip": None}},
    {"name": "added_list", "type": {"type": "array", "items": "int"}, "default": [1, 2]},
]}

# Evolution 2: a rename through aliases, a string read as bytes, a symbol removed (the reader's
# default takes it), a nullable field made from a plain one.
ZOO_V3 = {**ZOO_V2, "fields": [
    *[f for f in ZOO_V2["fields"] if f["name"] not in ("s", "kind", "l")],
    {"name": "text", "aliases": ["s"], "type": "bytes"},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "C", "D"], "default": "D"}},
    {"name": "l", "type": ["null", "long"], "default": None},
]}


def zoo_records(n: int = 12) -> list[dict]:
    out = []
    for k in range(n):
        out.append({
            "n": None, "flag": k % 2 == 0, "i": (-1) ** k * k * 1000003 % (2 ** 31), "l": -(2 ** 62) + k,
            "f": 1.5 * k, "d": -k / 3, "raw": bytes(range(k % 256)), "s": "é€𝄞"[: k % 4] + "x" * k,
            "home": {"street": f"street {k}", "zip": None if k % 3 else 10000 + k},
            "kind": "ABC"[k % 3], "tags": [f"t{j}" for j in range(k % 4)],
            "scores": {f"k{j}": j * 10 ** 12 for j in range(k % 3)}, "hash": bytes([k % 256, 1, 2, 3]),
            "maybe": None if k % 2 else f"m{k}",
            "either": [k, f"s{k}", {"street": "u", "zip": k}, None][k % 4],
            "price": decimal.Decimal(f"{(-1) ** k * k * 12345}.{k:03d}"),
            "fixed_price": decimal.Decimal(f"{k * 999999999}.{k % 100:02d}"),
            "day": datetime.date(2020, 1, 1) + datetime.timedelta(days=k * 97),
            "t_ms": datetime.time(k % 24, k % 60, k % 60, k * 1000 % 1_000_000),
            "t_us": datetime.time(k % 24, k % 60, 59, k * 7 % 1_000_000),
            "ts_ms": datetime.datetime(2024, 2, 29, 12, tzinfo=UTC) + datetime.timedelta(minutes=k, milliseconds=k),
            "ts_us": datetime.datetime(1969, 12, 31, 23, 59, tzinfo=UTC) + datetime.timedelta(microseconds=k * 3),
            "lts_ms": datetime.datetime(2030, 1, 1, k % 24) + datetime.timedelta(milliseconds=k),
            "lts_us": datetime.datetime(2000, 6, 15) + datetime.timedelta(microseconds=k),
            "id": str(uuid.UUID(int=k * 2 ** 64 + k)),
            "nested": [{"a": None, "b": {"street": "n", "zip": j}} for j in range(k % 3)],
            "matrix": [[float(j)] * j for j in range(k % 4)],
        })
    return out


BID = {"type": "record", "name": "Bid", "namespace": "nexmark", "fields": [
    {"name": "auction", "type": "long"},
    {"name": "bidder", "type": "long"},
    {"name": "price", "type": "long"},
    {"name": "channel", "type": "string"},
    {"name": "url", "type": "string"},
    {"name": "dateTime", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "extra", "type": "string"},
]}
"""Nexmark's bid event (the benchmark's record: ~70 bytes of Avro)."""


def bids(n: int) -> list[dict]:
    base = datetime.datetime(2026, 1, 1, tzinfo=UTC)
    return [{"auction": 1000 + i % 10007, "bidder": 2001 + i * 3 % 100003, "price": i * 17 % 100000,
             "channel": f"channel-{i % 10}", "url": f"https://www.nexmark.com/{i % 977}/item.htm?query=1",
             "dateTime": base + datetime.timedelta(milliseconds=i), "extra": ""} for i in range(n)]
