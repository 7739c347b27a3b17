"""The public API's contract: native module required, exceptions, configs, builders, encode."""
import subprocess
import sys

import pickle

import pytest

import pykbatch as kb
from pykbatch import errors
from pykbatch.kafka import control
from tests.samples import batch


def test_native_module_is_required():
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'pykbatch._native': raise ImportError('simulated missing build')\n"
            "sys.meta_path.insert(0, Block())\n"
            "import pykbatch\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode != 0
    assert "no pure-Python fallback" in out.stderr and "simulated missing build" in out.stderr


def test_public_names():
    for name in kb.__all__:
        assert hasattr(kb, name), name


@pytest.mark.parametrize("cls, code, base", [
    (kb.CorruptRecordError, 2, ValueError), (kb.InvalidRecordError, 87, ValueError),
    (kb.InvalidTimestampError, 32, ValueError), (kb.UnsupportedCompressionTypeError, 76, ValueError),
    (kb.UnsupportedForMessageFormatError, 43, ValueError), (errors.UnknownServerError, -1, ValueError),
])
def test_exceptions_have_two_bases_and_kafkas_code(cls, code, base):
    exc = cls("boom", 12, "some.rule")
    assert isinstance(exc, kb.KafkaDataError) and isinstance(exc, base)
    assert (exc.code, exc.offset, exc.position, exc.rule) == (code, 12, 12, "some.rule")
    assert exc.name == errors.error_name(code)
    assert str(exc) == "boom [rule some.rule, at byte 12]"
    assert errors.error_for(code, "boom") .__class__ is cls


def test_error_classes():
    assert errors.classify(2) == "retriable"
    assert errors.classify(87) == errors.classify(32) == "abortable"
    assert errors.classify(-1) == "fatal" and errors.classify(12345) == "fatal"


def test_config_is_checked():
    with pytest.raises(ValueError, match="origin"):
        kb.ValidationConfig(origin="broker")
    with pytest.raises(ValueError):
        kb.ValidationConfig(max_culprits=-1)


def test_topic_partition_in_kafka_messages():
    data = batch(1)
    bad = data[:57] + (5).to_bytes(4, "big") + data[61:]
    bad = bad[:17] + kb.crc32c(bad[21:]).to_bytes(4, "big") + bad[21:]
    result = kb.validate(bad, kb.ValidationConfig(topic_partition="orders-3"))
    assert result.culprits[0].message == ("Inconsistent batch offset range [0, 0] and count of records 5 in "
                                          "topic partition orders-3")


def test_build_batch_arguments():
    with pytest.raises(TypeError, match="not str"):
        kb.build_batch([{"key": "text", "value": b"v"}])
    with pytest.raises(ValueError, match="Invalid negative timestamp -5"):
        kb.build_batch([{"value": b"v", "timestamp": -5}])
    with pytest.raises(ValueError, match="transactional batches need a producer_id"):
        kb.build_batch([(None, b"v")], is_transactional=True)
    with pytest.raises(ValueError, match="unknown compression"):
        kb.build_batch([(None, b"v")], compression="brotli")
    lat = kb.build_batch([{"value": b"v", "timestamp": 5}], timestamp_type="LogAppendTime", max_timestamp=99)
    (b,) = kb.iter_batches(lat)
    assert b.timestamp_type == "LogAppendTime" and [r.timestamp for r in b] == [99]
    assert kb.encode(kb.iter_batches(lat)) == lat


def test_encode_edited_records_generic_path():
    (b,) = kb.iter_batches(batch(3))

    class Edited:
        def __init__(self, batch, keep):
            self._b, self._keep = batch, keep
            for name in ("base_offset", "partition_leader_epoch", "attributes", "base_timestamp",
                         "max_timestamp", "producer_id", "producer_epoch", "base_sequence"):
                setattr(self, name, getattr(batch, name))
            self.record_count = len(keep)  # as compaction leaves it: lastOffsetDelta kept
            self.last_offset_delta = batch.last_offset_delta

        def __iter__(self):
            return iter(self._keep)

    recs = list(b)
    edited = kb.encode([Edited(b, [recs[0], recs[2]])])
    result = kb.validate(edited, kb.ValidationConfig(origin="log"))
    assert result.ok and result.records == 2
    assert [r.key for r in next(kb.iter_batches(edited))] == [b"k0", b"k2"]


def test_control_records():
    assert control.parse_control(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x09") == (1, "COMMIT", 9)
    assert control.parse_control(b"\x00\x00\x00\x80", None) == (-1, "UNKNOWN", None)
    with pytest.raises(kb.InvalidRecordError, match="at least 4 bytes, but found only 2"):
        control.parse_control(b"\x00\x00", None)
    with pytest.raises(kb.InvalidRecordError, match="at least 6 bytes"):
        control.parse_control(b"\x00\x00\x00\x00", b"\x00")


def test_culprit_as_dict_and_repr():
    bad = bytearray(batch(1))
    bad[-2] ^= 1
    (c,) = kb.validate(bytes(bad)).culprits
    d = c.as_dict()
    assert d["name"] == "CORRUPT_MESSAGE" and d["rule"] == "batch.crc_mismatch" and d["position"] == 17
    assert "batch.crc_mismatch" in repr(c) and c.error_class == "retriable"


def test_gil_released_paths_work_from_threads():
    import concurrent.futures
    data = b"".join(batch(200, base_offset=200 * i) for i in range(50))
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(kb.validate, [data] * 8, [kb.ValidationConfig(origin="log")] * 8))
    assert all(r.ok and r.records == 10000 for r in results)


def test_record_fields_are_read_only_slots_and_pickle():
    data = kb.build_batch([{"key": b"k", "value": b"v", "timestamp": 5, "headers": [("h", b"1")]}], base_offset=40)
    (rec,) = next(iter(kb.iter_batches(data)))
    assert (rec.offset, rec.timestamp, rec.key, rec.value, rec.headers) == (40, 5, b"k", b"v", (("h", b"1"),))
    assert type(kb.Record.__dict__["value"]).__name__ == "member_descriptor"
    with pytest.raises(AttributeError):
        rec.value = b"x"
    again = pickle.loads(pickle.dumps(rec))
    assert again == rec and hash(again) == hash(rec) and again.position == rec.position
    assert repr(again) == repr(rec)


def test_header_keys_are_decoded_per_record_when_they_change():
    """Header keys are reused from the previous record only when their bytes are the same."""
    keys = [["trace", "src"], ["trace", "src"], ["trace", "dst"], ["tracf"], ["é", "src"], ["é"], [],
            ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"], ["a", "b", "c", "d", "e", "f", "g", "h", "i", "k"]]
    recs = [{"key": None, "value": b"%d" % i, "timestamp": 0, "headers": [(k, k.encode()) for k in ks]}
            for i, ks in enumerate(keys)]
    batch = next(iter(kb.iter_batches(kb.build_batch(recs))))
    for want, rec, tup in zip(keys, batch, batch.tuples()):
        assert [h for h, _ in rec.headers] == want == [h for h, _ in tup[4]]
        assert [v for _, v in rec.headers] == [k.encode() for k in want]
    # bytes that are not UTF-8 decode with replacement, and never stand for a cached key
    raw = kb.build_batch([{"key": None, "value": None, "timestamp": 0, "headers": [(b, b"") for b in ks]}
                          for ks in ([b"\xff\xfe"], [b"\xff\xfe"], [b"ab"])])
    assert [r.headers for r in next(iter(kb.iter_batches(raw)))] == [(("\ufffd\ufffd", b""),)] * 2 + [(("ab", b""),)]
