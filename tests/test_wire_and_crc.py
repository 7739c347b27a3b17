"""Varint/varlong readers and CRC-32C against Kafka's ByteUtilsTest / Crc32CTest vectors,
the crc32c package, and the portable path."""
import os
import random
import subprocess
import sys

import crc32c as crc32c_ref
import pytest
from hypothesis import given, strategies as st

import pykbatch
from pykbatch import _native
from tests.conftest import kafka_vectors


@pytest.mark.parametrize("v", kafka_vectors(lambda v: v["expected"].get("type") in
                                            ("varint", "varlong", "unsigned_varint")))
def test_varint_vectors(v):
    data, exp = bytes.fromhex(v["hex"]), v["expected"]
    value, size = _native._read_varint(data, exp["type"])
    if "value_as_uint32" in exp:
        assert value == exp["value_as_uint32"]
    else:
        assert (value, size) == (exp["value"], exp["size"])


@pytest.mark.parametrize("v", kafka_vectors(lambda v: v["expected"].get("outcome") == "error"
                                            and "ByteUtils" in v["source_file"]))
def test_overlong_varints_rejected(v):
    kind = "varlong" if "Varlong" in v["expected"]["exceptionMessage"] else "varint"
    with pytest.raises(ValueError, match="too long"):
        _native._read_varint(bytes.fromhex(v["hex"]), kind)


@pytest.mark.parametrize("v", kafka_vectors(lambda v: "decoded_zigzag_int32" in v["expected"]))
def test_fifth_byte_high_bits_dropped_like_java(v):
    data = bytes.fromhex(v["hex"])
    assert _native._read_varint(data, "varint") == (v["expected"]["decoded_zigzag_int32"], 5)
    assert _native._read_varint(data, "unsigned_varint")[0] == v["expected"]["decoded_unsigned_int32"] & 0xFFFFFFFF


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff", b"\x80\x80\x80\x80"])
def test_truncated_varints_never_read_past_the_end(data):
    for kind in ("varint", "unsigned_varint", "varlong"):
        with pytest.raises(ValueError, match="truncated"):
            _native._read_varint(data, kind)


@given(st.integers(-2**31, 2**31 - 1))
def test_varint_roundtrip_through_encoder(n):
    batch = pykbatch.build_batch([{"key": None, "value": b"x" * (abs(n) % 300), "timestamp": 5}])
    rec = next(iter(next(pykbatch.iter_batches(batch))))
    assert len(rec.value) == abs(n) % 300


@pytest.mark.parametrize("v", kafka_vectors(lambda v: "crc32c" in v["expected"]))
def test_crc32c_vectors(v):
    data = bytes.fromhex(v["hex"])
    assert pykbatch.crc32c(data) == v["expected"]["crc32c"]
    assert _native._crc32c_sw(data) == v["expected"]["crc32c"]


def test_crc32c_matches_reference_package_every_length_and_alignment():
    rng = random.Random(7)
    blob = rng.randbytes(200_000)
    for n in list(range(0, 300)) + [767, 768, 769, 24575, 24576, 24577, 49152 + 5, 150_001]:
        for off in (0, 1, 3, 7):
            piece = blob[off:off + n]
            assert pykbatch.crc32c(piece) == crc32c_ref.crc32c(piece), (n, off)
            assert _native._crc32c_sw(piece) == crc32c_ref.crc32c(piece), (n, off)


@pytest.mark.parametrize("v", kafka_vectors(lambda v: "crc32" in v["expected"]))
def test_crc32_vectors(v):
    data = bytes.fromhex(v["hex"])
    assert pykbatch.crc32(data) == _native._crc32_sw(data) == v["expected"]["crc32"]


def test_crc32_matches_zlib_every_length_and_alignment():
    import zlib
    blob = random.Random(3).randbytes(70_000)
    for n in list(range(0, 200)) + [255, 256, 257, 1023, 1024, 4097, 65_536 + 3]:
        for off in (0, 1, 5):
            piece = blob[off:off + n]
            assert pykbatch.crc32(piece, 77) == zlib.crc32(piece, 77), (n, off)
            assert _native._crc32_sw(piece, 77) == zlib.crc32(piece, 77), (n, off)


def test_crc32c_continues_like_the_reference():
    a, b = b"hello ", b"world" * 1000
    assert pykbatch.crc32c(b, pykbatch.crc32c(a)) == crc32c_ref.crc32c(a + b)


def test_crc32c_accepts_buffers():
    data = bytearray(b"123456789")
    assert pykbatch.crc32c(data) == pykbatch.crc32c(memoryview(data)) == 3808858755


def test_native_info_names_the_live_path():
    assert pykbatch.native_info()["crc32c"] in ("sse4.2+pclmul", "armv8-crc", "software")


def test_env_var_forces_software_crc():
    code = ("import pykbatch; i = pykbatch.native_info(); "
            "print(i['crc32c'], i['crc32'], pykbatch.crc32c(b'123456789'), pykbatch.crc32(b'x' * 100))")
    env = dict(os.environ, PYKBATCH_CRC32C_SW="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    import zlib
    assert out.stdout.split() == ["software", "software", "3808858755", str(zlib.crc32(b"x" * 100))]
