"""Where the time of a compressed validation goes, to decide whether Kafka's codec framings
(xerial snappy, Kafka's LZ4 frame) belong in C (issue 12).  The codec library (cramjam) stays a
Python-called dependency either way, so moving a framing's parse into C can save at most what the
Python framing layer costs beyond calling the library once per block:

    validate   kb.validate of the workload (C walk + decompression callback + framing + library)
    layer      pykbatch.codecs' decompression of every payload (framing in Python + library)
    library    the library alone on the payloads' blocks, split beforehand (the floor: no framing)

and the verdict line prints (layer - library) / validate: the most a C framing could win.

    OPENBLAS_NUM_THREADS=1 taskset -c 1 python benchmarks/codec_framing.py [--repeats 9]
"""
import argparse
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cramjam  # noqa: E402

import pykbatch as kb  # noqa: E402
from compare import measure  # noqa: E402
from compressed import recompress  # noqa: E402
from pykbatch import codecs  # noqa: E402
from workloads import WORKLOADS, build  # noqa: E402


def payloads(data: bytes) -> list[memoryview]:
    return [memoryview(data)[b.position + 61:b.position + b.size] for b in kb.iter_batches(data)]


def snappy_blocks(payload) -> list:
    pos, out = 16, []
    while pos + 4 <= len(payload):
        (n,) = struct.unpack_from(">i", payload, pos)
        out.append(payload[pos + 4:pos + 4 + n])
        pos += 4 + n
    return out


def lz4_blocks(payload) -> list:
    flg = payload[4]
    pos, out = 7 + (8 if flg & 0x08 else 0), []
    while True:
        (size,) = struct.unpack_from("<I", payload, pos)
        pos += 4
        if size == 0:
            return out
        out.append((size & 0x80000000, payload[pos:pos + (size & 0x7FFFFFFF)]))
        pos += (size & 0x7FFFFFFF) + (4 if flg & 0x10 else 0)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args(argv)
    scratch = codecs.Scratch(codecs.DEFAULT_MAX_DECOMPRESSED)
    out = memoryview(bytearray(16 << 20))
    print(f"{'workload':8} {'codec':7} {'validate ms':>11} {'layer ms':>9} {'library ms':>10} "
          f"{'framing share':>13}")
    for name in WORKLOADS:
        plain = build(name)
        for codec in ("snappy", "lz4"):
            data = recompress(plain, codec)
            loads = payloads(data)
            cid = codecs.NAMES.index(codec)
            if codec == "snappy":
                blocks = [snappy_blocks(p) for p in loads]

                def library(_):
                    for bs in blocks:
                        at = 0
                        for block in bs:
                            at += cramjam.snappy.decompress_raw_into(block, out[at:])
            else:
                blocks = [lz4_blocks(p) for p in loads]

                def library(_):
                    for bs in blocks:
                        at = 0
                        for stored, block in bs:
                            if stored:
                                out[at:at + len(block)] = block
                                at += len(block)
                            else:
                                at += cramjam.lz4.decompress_block_into(block, out[at:])

            def layer(_):
                for p in loads:
                    scratch.decompress(cid, 2, p)

            t_validate = measure(kb.validate, data, args.repeats)
            t_layer = measure(layer, None, args.repeats)
            t_library = measure(library, None, args.repeats)
            share = (t_layer - t_library) / t_validate
            print(f"{name:8} {codec:7} {t_validate * 1e3:11.2f} {t_layer * 1e3:9.2f} {t_library * 1e3:10.2f} "
                  f"{share:12.1%}")


if __name__ == "__main__":
    main()
