"""Decompression bombs are rejected under bounded memory: the cap holds while decompressing.
Measured as the peak RSS of a fresh process (codec libraries allocate outside tracemalloc)."""
import json
import subprocess
import sys
import textwrap


MiB = 1 << 20

PROBE = textwrap.dedent("""
    import json, resource, sys, zlib, struct
    import pykbatch as kb
    from pykbatch import codecs
    kind, cap = sys.argv[1], int(sys.argv[2])
    if kind == "gzip":                      # 1000:1 -- 256 MiB of zeros in ~250 KiB
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        payload = b"".join(c.compress(bytes(1 << 20)) for _ in range(256)) + c.flush()
        codec = 1
    else:  # a single-segment zstd frame header declaring 8 GiB, then garbage
        payload = codecs.ZSTD_MAGIC + bytes([0xE0]) + (8 << 30).to_bytes(8, "little") + bytes(64)
        codec = 4
    batch = kb.build_batch([(None, b"x")])
    attrs = codec.to_bytes(2, "big")
    body = attrs + batch[23:61] + payload
    data = batch[:8] + (len(body) + 9).to_bytes(4, "big") + batch[12:17] + kb.crc32c(body).to_bytes(4, "big") + body
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = kb.validate(data, kb.ValidationConfig(max_decompressed_bytes=cap))
    try:
        for b in kb.iter_batches(data, max_decompressed_bytes=cap):
            list(b)
        raised = None
    except kb.KafkaDataError as exc:
        raised = exc.rule
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"rules": [c.rule for c in result.culprits], "raised": raised,
                      "ratio": 256 * (1 << 20) / len(payload), "peak_kib": after - before}))
""")


def probe(kind, cap):
    out = subprocess.run([sys.executable, "-c", PROBE, kind, str(cap)], capture_output=True, text=True,
                         check=True, timeout=300)
    return json.loads(out.stdout)


def test_gzip_bomb_is_rejected_within_the_cap():
    cap = 16 * MiB
    got = probe("gzip", cap)
    assert got["ratio"] > 1000
    assert got["rules"] == ["batch.decompressed_too_large"]
    assert got["raised"] == "batch.decompressed_too_large"
    # the scratch buffer fills up to the cap, plus one 1 MiB step and interpreter noise
    assert got["peak_kib"] * 1024 < cap + 12 * MiB, got


def test_zstd_frame_declaring_gibs_is_rejected_before_allocating():
    got = probe("zstd", 64 * MiB)
    assert got["rules"] == ["batch.decompressed_too_large"]
    assert got["raised"] == "batch.decompressed_too_large"
    assert got["peak_kib"] * 1024 < 8 * MiB, got
