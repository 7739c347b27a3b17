"""Varint/varlong readers and CRC-32C against Kafka's ByteUtilsTest / Crc32CTest vectors,
the crc32c package, and the portable path."""
import os
import platform
import random
import subprocess
import sys

import crc32c as crc32c_ref
import pytest
from hypothesis import given, strategies as st

import pykbatch
from pykbatch import _native
from tests.conftest import ROOT, kafka_vectors


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


def test_crc32c_any_length_alignment_and_start_like_the_reference():
    """Every kernel's boundaries (the folding path's 256-byte blocks and its tail, the crc32 streams'
    lanes) drawn at random: lengths, alignments and running values."""
    seed = int(os.environ.get("PYKBATCH_CRC_SEED", "20261127"))
    print(f"PYKBATCH_CRC_SEED={seed}")
    rng = random.Random(seed)
    blob = rng.randbytes(140_000)
    for _ in range(3000):
        n = rng.choice((rng.randrange(0, 1100), rng.randrange(0, 70_000), 256 * rng.randrange(1, 40) + rng.randrange(-2, 3)))
        off, start = rng.randrange(64), rng.getrandbits(32)
        piece = blob[off:off + max(n, 0)]
        assert pykbatch.crc32c(piece, start) == crc32c_ref.crc32c(piece, start), (n, off, start, seed)


def test_crc32c_continues_like_the_reference():
    a, b = b"hello ", b"world" * 1000
    assert pykbatch.crc32c(b, pykbatch.crc32c(a)) == crc32c_ref.crc32c(a + b)


def test_crc32c_accepts_buffers():
    data = bytearray(b"123456789")
    assert pykbatch.crc32c(data) == pykbatch.crc32c(memoryview(data)) == 3808858755


def _cpu_flags() -> set:
    """The CPU's feature flags as Linux lists them (x86 "flags", arm "Features")."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return set()
    return {flag for line in text.splitlines() if line.split(":")[0].strip() in ("flags", "Features")
            for flag in line.split(":", 1)[1].split()}


def test_native_info_names_the_live_path():
    """The hardware CRC paths are live wherever the CPU has the instructions: a build or a probe
    that silently fell back to software fails here."""
    flags = _cpu_flags()
    if not flags:
        pytest.skip("no /proc/cpuinfo to say what the CPU can do")
    forced = os.environ.get("PYKBATCH_CRC32C_SW", "0") not in ("", "0")
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        hardware = {"sse4_2", "pclmulqdq"} <= flags
        folding = hardware and {"avx512f", "vpclmulqdq"} <= flags  # Linux lists avx512f only when the OS saves zmm
        expected = ("avx512+vpclmulqdq" if folding else "sse4.2+pclmul" if hardware else "software",
                    "pclmul" if hardware else "software")
    elif machine in ("aarch64", "arm64"):
        expected = ("armv8-crc" if "crc32" in flags else "software", "software")
    else:
        expected = ("software", "software")
    if forced:
        expected = ("software", "software")
    info = pykbatch.native_info()
    assert (info["crc32c"], info["crc32"]) == expected


PORTABLE_RUN = """
import json, sys
import pykbatch as kb
from tests.test_reader_and_validator import reader_fault
from tests.conftest import KAFKA_VECTORS, load_json
out = {"impl": [kb.native_info()["crc32c"], kb.native_info()["crc32"]], "cases": []}
for data in [bytes.fromhex(v.get("hex") or "") for v in load_json(KAFKA_VECTORS)] + [bytes.fromhex(h) for h in sys.argv[1:]]:
    r = kb.validate(data)
    out["cases"].append([kb.crc32c(data), kb.crc32(data), [(c.rule, c.position, c.message) for c in r.culprits],
                         reader_fault(data), r.records])
print(json.dumps(out))
"""


def test_portable_crc_path_end_to_end():
    """The whole suite's kind of work (validation of Kafka's vectors and of damaged batches of
    every magic and codec, the readers, CRC-32C and CRC-32 of whole inputs) run again with
    PYKBATCH_CRC32C_SW=1: the portable CRCs give every answer the hardware ones give."""
    import json
    import random

    from tests.kafka_cases import damage, random_batch
    rng = random.Random(7)
    extra = [random_batch(rng, magic) for magic in (0, 1, 2) for _ in range(20)]
    extra += [damage(rng, random_batch(rng, 2)) for _ in range(40)]
    extra.append(bytes(range(256)) * 97)  # long input: the hardware paths' bulk loops
    runs = {}
    for sw in ("0", "1"):
        env = dict(os.environ, PYKBATCH_CRC32C_SW=sw, PYTHONPATH=str(ROOT))
        proc = subprocess.run([sys.executable, "-c", PORTABLE_RUN, *(d.hex() for d in extra)], env=env,
                              capture_output=True, text=True, check=True, cwd=ROOT)
        runs[sw] = json.loads(proc.stdout)
    assert runs["1"]["impl"] == ["software", "software"]
    assert runs["0"]["cases"] == runs["1"]["cases"]
    assert any(case[2] for case in runs["1"]["cases"])  # the damage reached the checks


def test_env_var_forces_software_crc():
    code = ("import pykbatch; i = pykbatch.native_info(); "
            "print(i['crc32c'], i['crc32'], pykbatch.crc32c(b'123456789'), pykbatch.crc32(b'x' * 100))")
    env = dict(os.environ, PYKBATCH_CRC32C_SW="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    import zlib
    assert out.stdout.split() == ["software", "software", "3808858755", str(zlib.crc32(b"x" * 100))]
