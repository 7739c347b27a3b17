"""Decompression of record payloads (Kafka's CompressionType and its codecs' stream framing),
bounded while it runs.

Codecs come from cramjam (snappy, lz4 blocks, zstd) and zlib (gzip, whose member boundaries
the JDK semantics need); the Kafka framings around them (xerial snappy, Kafka's LZ4 frame
subset with its magic-0 header checksum) are parsed here.  Every function writes into a
caller's scratch buffer and never produces more than ``cap`` bytes, so a decompression bomb
costs at most ``cap`` bytes of memory before it is rejected.
"""
from __future__ import annotations

import struct
import zlib

import cramjam
import xxhash

from pykbatch._catalogue import CODEC_IDS, CODEC_NAMES as NAMES, codec_name  # noqa: F401 (NAMES: by id)

GZIP, SNAPPY, LZ4, ZSTD = (CODEC_IDS[name] for name in ("gzip", "snappy", "lz4", "zstd"))

# Kafka's producer and broker defaults bound a batch at 1 MiB (max.request.size,
# message.max.bytes); 64 MiB leaves room for 64:1 compression of such a batch.
DEFAULT_MAX_DECOMPRESSED = 64 * 1024 * 1024

GZIP_STEP = 1 << 20
XERIAL_MAGIC = b"\x82SNAPPY\x00"
LZ4_MAGIC = b"\x04\x22\x4d\x18"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class CodecError(Exception):
    """A payload that cannot be decompressed: ``rule``, ``offset`` into the payload, message;
    ``produced``: how many bytes of output came out before the failure (Kafka reads records out
    of a decompressing stream, so a fault in them is what it meets first)."""

    def __init__(self, rule: str, offset: int, message: str, produced: int = 0):
        super().__init__(message)
        self.rule = rule
        self.offset = offset
        self.message = message
        self.produced = produced


def _too_large(cap: int, offset: int = 0, declared: int | None = None) -> CodecError:
    what = f"declares {declared} bytes" if declared is not None else "produces more"
    return CodecError("batch.decompressed_too_large", offset,
                      f"Decompressed records {what} than the limit of {cap} bytes")


def _failed(codec: int, offset: int, cause, produced: int = 0) -> CodecError:
    return CodecError("batch.decompression_failed", offset,
                      f"Failed to decompress {codec_name(codec)} record stream: {cause}", produced)


def decompress_into(codec: int, magic: int, data: memoryview, out: memoryview) -> int:
    """Decompress ``data`` into ``out`` (whose length is the cap); returns the bytes written."""
    if codec == GZIP:
        return _gzip(data, out)
    if codec == SNAPPY:
        return _snappy(data, out)
    if codec == LZ4:
        return _lz4(data, out, magic)
    if codec == ZSTD:
        return _zstd(data, out)
    raise CodecError("batch.unknown_codec", 0, f"Unknown compression type id: {codec}")


def _gzip(data, out) -> int:
    """RFC 1952 members back to back, as java.util.zip.GZIPInputStream reads them: its header
    rules (reserved flag bits ignored, an FHCRC checked), the trailer's CRC-32 and size checked,
    and trailing bytes that do not start another member ignored."""
    cap, written = len(out), 0
    raw = data  # zlib reads the memoryview in place: no copy of the payload
    pos = _gzip_header(raw, 0)
    while True:
        d = zlib.decompressobj(wbits=-15)
        pending, crc, size = raw[pos:], 0, 0
        while not d.eof and pending:
            try:  # 1 MiB at a time, straight into `out`: no cap-sized intermediate
                chunk = d.decompress(pending, min(GZIP_STEP, cap - written + 1))
            except zlib.error as exc:
                member_output = written - size  # this member's output starts there
                produced = member_output + _jdk_inflate_prefix(raw[pos:], out, member_output)
                raise _failed(GZIP, pos, exc, produced) from None
            if written + len(chunk) > cap:
                raise _too_large(cap, pos)
            out[written:written + len(chunk)] = chunk
            written += len(chunk)
            crc, size = zlib.crc32(chunk, crc), size + len(chunk)
            pending = d.unconsumed_tail
        if not d.eof:
            raise _failed(GZIP, len(raw), "Unexpected end of ZLIB input stream", written)  # the JDK's words
        pos = len(raw) - len(d.unused_data)
        if len(raw) - pos < 8:
            raise _failed(GZIP, pos, "Unexpected end of ZLIB input stream", written)
        if struct.unpack_from("<II", raw, pos) != (crc, size & 0xFFFFFFFF):
            raise _failed(GZIP, pos, "Corrupt GZIP trailer", written)
        pos += 8
        try:
            pos = _gzip_header(raw, pos)
        except CodecError:  # not another member: the JDK stops there
            return written


# Kafka's GzipCompression: GZIPInputStream with an 8 KiB input buffer, read through a 16 KiB
# ChunkedBytesStream; each read is one Inflater.inflate call, whose output is lost when it fails.
JDK_GZIP_INPUT, JDK_GZIP_OUTPUT = 8 * 1024, 16 * 1024


def _jdk_inflate_prefix(deflate, out, at: int) -> int:
    """How many bytes of a member's output a JVM reader got before the damage in ``deflate``:
    the output of the inflate calls before the failing one, call by call as Kafka's streams
    make them (written to out[at:]).  Only on the failure path."""
    d = zlib.decompressobj(wbits=-15)
    produced = 0
    for start in range(0, len(deflate), JDK_GZIP_INPUT):
        pending = deflate[start:start + JDK_GZIP_INPUT]
        while pending:
            room = min(JDK_GZIP_OUTPUT, len(out) - at - produced)
            try:
                chunk = d.decompress(pending, room)
            except zlib.error:
                return produced
            out[at + produced:at + produced + len(chunk)] = chunk
            produced += len(chunk)
            pending = d.unconsumed_tail
            if d.eof or not room:
                return produced
    return produced


def _gzip_header(raw, pos: int) -> int:
    """Where the deflate data of the member at ``pos`` starts (GZIPInputStream.readHeader)."""
    end = len(raw)

    def need(n: int) -> None:
        if end - pos < n:
            raise _failed(GZIP, end, "Unexpected end of ZLIB input stream")

    start = pos
    need(10)
    if bytes(raw[pos:pos + 2]) != b"\x1f\x8b":
        raise _failed(GZIP, pos, "Not in GZIP format")
    if raw[pos + 2] != 8:
        raise _failed(GZIP, pos + 2, "Unsupported compression method")
    flags = raw[pos + 3]
    pos += 10
    if flags & 4:  # FEXTRA
        need(2)
        pos += 2 + struct.unpack_from("<H", raw, pos)[0]
        need(0)
    for flag in (8, 16):  # FNAME, FCOMMENT: zero-terminated
        if flags & flag:
            zero = bytes(raw[pos:]).find(b"\x00")
            if zero < 0:
                raise _failed(GZIP, end, "Unexpected end of ZLIB input stream")
            pos += zero + 1
    if flags & 2:  # FHCRC: the low 16 bits of the header's CRC-32
        need(2)
        if zlib.crc32(bytes(raw[start:pos])) & 0xFFFF != struct.unpack_from("<H", raw, pos)[0]:
            raise _failed(GZIP, pos, "Corrupt GZIP header")
        pos += 2
    return pos


def _snappy(data, out) -> int:
    """xerial snappy-java stream (header, then big-endian block lengths), or one raw block when
    the input does not start with the xerial magic (SnappyInputStream's fallback)."""
    n = len(data)
    if n < 16 or bytes(data[:8]) != XERIAL_MAGIC:
        return _snappy_block(data, out, 0, 0)
    written, pos = 0, 16
    while n - pos >= 4:
        (length,) = struct.unpack_from(">i", data, pos)
        if length == 0x82534E41 - (1 << 32):  # the magic again: a concatenated stream
            if bytes(data[pos:pos + 8]) != XERIAL_MAGIC or n - pos < 16:
                return written
            pos += 16
            continue
        if length < 0 or length > n - pos - 4:
            raise _failed(SNAPPY, pos, f"invalid chunk size {length}", written)
        written += _snappy_block(data[pos + 4:pos + 4 + length], out, written, pos + 4)
        pos += 4 + length
    return written


def _snappy_block(block, out, at: int, offset: int) -> int:
    """One snappy block into out[at:]; a failing block gives nothing (SnappyInputStream
    uncompresses whole chunks), the blocks before it stand (``produced``)."""
    try:
        size = cramjam.snappy.decompress_raw_len(block)
    except cramjam.DecompressionError as exc:
        raise _failed(SNAPPY, offset, exc, at) from None
    if at + size > len(out):
        raise _too_large(len(out), offset, at + size)
    try:
        return cramjam.snappy.decompress_raw_into(block, out[at:at + size])
    except cramjam.DecompressionError as exc:
        raise _failed(SNAPPY, offset, exc, at) from None


def _lz4(data, out, magic: int) -> int:
    """Kafka's LZ4 frame: one frame; the header checksum is skipped for magic 0 (KAFKA-1493
    wrote it over the magic bytes too) and verified otherwise; block checksums verified when
    flagged; the content checksum is never checked; bytes after the end mark are ignored."""
    n = len(data)
    if n < 7:
        raise _failed(LZ4, 0, "Stream ended prematurely")
    if bytes(data[:4]) != LZ4_MAGIC:
        raise _failed(LZ4, 0, "Stream unsupported (invalid magic bytes)")
    flg, bd = data[4], data[5]
    if flg & 0x03:
        raise _failed(LZ4, 4, "Reserved bits must be 0")
    if (flg >> 6) != 1:
        raise _failed(LZ4, 4, f"Version {flg >> 6} is unsupported")
    if not flg & 0x20:
        raise _failed(LZ4, 4, "Dependent block stream is unsupported")
    if bd & 0x8F or not 4 <= (bd >> 4) & 7 <= 7:
        raise _failed(LZ4, 5, "Block size code must be 4..7 and reserved bits 0")
    block_max = 1 << (2 * ((bd >> 4) & 7) + 8)
    pos = 6 + (8 if flg & 0x08 else 0)
    if n < pos + 1:
        raise _failed(LZ4, n, "Stream ended prematurely")
    if magic > 0 and data[pos] != (xxhash.xxh32_intdigest(bytes(data[4:pos])) >> 8) & 0xFF:
        raise _failed(LZ4, pos, "Stream frame descriptor corrupted")
    pos += 1
    cap, written = len(out), 0
    block_checksums = flg & 0x10
    while True:
        if n - pos < 4:
            raise _failed(LZ4, pos, "Stream ended prematurely", written)
        (size,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if size == 0:
            return written
        stored, size = size & 0x80000000, size & 0x7FFFFFFF
        if size > block_max:
            raise _failed(LZ4, pos - 4, f"Block size {size} exceeded max: {block_max}", written)
        if n - pos < size + (4 if block_checksums else 0):
            raise _failed(LZ4, pos, "Stream ended prematurely", written)
        block = data[pos:pos + size]
        if block_checksums:
            (want,) = struct.unpack_from("<I", data, pos + size)
            if xxhash.xxh32_intdigest(bytes(block)) != want:
                raise _failed(LZ4, pos + size, "Block checksum mismatch", written)
        room = min(block_max, cap - written)
        if stored:
            if size > room:
                raise _too_large(cap, pos)
            out[written:written + size] = block
            written += size
        else:
            try:
                written += cramjam.lz4.decompress_block_into(block, out[written:written + room])
            except cramjam.DecompressionError as exc:
                if room < block_max:
                    raise _too_large(cap, pos) from None
                raise _failed(LZ4, pos, exc, written) from None
        pos += size + (4 if block_checksums else 0)


def zstd_declared_size(data) -> int | None:
    """Content size declared in the first zstd frame header, if any."""
    if len(data) < 6 or bytes(data[:4]) != ZSTD_MAGIC:
        return None
    fhd = data[4]
    fcs_flag, single_segment, dict_flag = fhd >> 6, (fhd >> 5) & 1, fhd & 3
    pos = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[dict_flag]
    size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    if size == 0 or len(data) < pos + size:
        return None
    value = int.from_bytes(bytes(data[pos:pos + size]), "little")
    return value + 256 if size == 2 else value


def _zstd(data, out) -> int:
    """zstd frames (concatenated and skippable frames included), as libzstd streams them."""
    declared = zstd_declared_size(data)
    if declared is not None and declared > len(out):
        raise _too_large(len(out), 0, declared)
    try:
        return cramjam.zstd.decompress_into(data, out)
    except cramjam.DecompressionError as exc:
        if "failed to write whole buffer" in str(exc):
            raise _too_large(len(out)) from None
        raise _failed(ZSTD, 0, exc, _zstd_prefix(data, out)) from None


# Kafka's ZstdCompression reads through a 16 KiB ChunkedBytesStream: each read is one
# ZSTD_decompressStream call, whose output is lost when it fails.
JDK_ZSTD_OUTPUT = 16 * 1024


def _zstd_prefix(data, out) -> int:
    """How many bytes of the first frame's output a JVM reader got before the damage: the blocks
    before it, and the bytes of a raw block that is cut short (libzstd streams those); when a
    block fails to decode, only the 16 KiB reads completed before it.  Frames that declare
    their content size are not split (0).  Only on the failure path."""
    n = len(data)
    if n < 6 or bytes(data[:4]) != ZSTD_MAGIC:
        return 0
    fhd = data[4]
    single_segment, dict_flag, fcs_flag = (fhd >> 5) & 1, fhd & 3, fhd >> 6
    if fcs_flag or single_segment:
        return 0
    pos = 6 + (0, 1, 2, 4)[dict_flag]
    header = bytes(data[:4]) + bytes([fhd & ~0x04]) + bytes(data[5:pos])  # no checksum to expect
    exponent, mantissa = data[5] >> 3, data[5] & 7
    window = (1 << (10 + exponent)) + ((1 << (10 + exponent)) >> 3) * mantissa
    block_max = min(window, 128 * 1024)
    blocks = []  # (start, end) of each whole block, header included
    raw_tail = b""
    while n - pos >= 3:
        head = int.from_bytes(bytes(data[pos:pos + 3]), "little")
        kind, size = (head >> 1) & 3, head >> 3
        body = 1 if kind == 1 else size
        if kind == 3 or (kind != 1 and size > block_max):
            break
        if n - pos - 3 < body:
            if kind == 0:  # a raw block's bytes come out as they arrive
                raw_tail = bytes(data[pos + 3:n])
            break
        blocks.append((pos, pos + 3 + body))
        if head & 1:
            break
        pos += 3 + body

    def decoded(k: int) -> bytes | None:
        """The output of the first k blocks, or None when they do not decode."""
        if k == 0:
            return b""
        parts = [header] + [bytes(data[a:b]) for a, b in blocks[:k]]
        last = bytearray(parts[-1])
        last[0] |= 1
        parts[-1] = bytes(last)
        try:
            return bytes(cramjam.zstd.decompress(b"".join(parts)))
        except cramjam.DecompressionError:
            return None

    lo, hi = 0, len(blocks)  # the largest k whose blocks decode (decoding is monotone in k)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if decoded(mid) is None:
            hi = mid - 1
        else:
            lo = mid
    good = decoded(lo) or b""
    if lo == len(blocks) and (raw_tail or not blocks or not (data[blocks[-1][0]] & 1)):
        prefix = good + raw_tail  # the input ran out: every read before that succeeded
    else:
        prefix = good[:len(good) - len(good) % JDK_ZSTD_OUTPUT]  # a block failed: its read is lost
    prefix = prefix[:len(out)]
    out[:len(prefix)] = prefix
    return len(prefix)


class Scratch:
    """A reusable output buffer of ``cap`` bytes.  It is allocated once, uninitialised (the
    operating system commits pages only as decompression writes them), and reused for every
    batch; ``decompress`` returns a view of the bytes produced."""

    def __init__(self, cap: int = DEFAULT_MAX_DECOMPRESSED):
        self.cap = cap
        self._buf = None  # allocated at the first compressed batch

    def decompress(self, codec: int, magic: int, data) -> memoryview:
        if self._buf is None:
            import numpy as np
            self._buf = memoryview(np.empty(self.cap, np.uint8)) if self.cap else memoryview(bytearray())
        n = decompress_into(codec, magic, memoryview(data).cast("B"), self._buf)
        return self._buf[:n]

    def produced(self, error: CodecError) -> memoryview:
        """The output that came out before ``error`` (valid until the next ``decompress``)."""
        return self._buf[:error.produced] if self._buf is not None else memoryview(b"")


def compress(codec: int, data: bytes, magic: int = 2) -> bytes:
    """Compress a records payload the way Kafka's producer frames it."""
    if codec == GZIP:
        c = zlib.compressobj(wbits=31)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        out = [XERIAL_MAGIC, struct.pack(">ii", 1, 1)]
        for i in range(0, len(data), 32 * 1024):
            block = bytes(cramjam.snappy.compress_raw(data[i:i + 32 * 1024]))
            out += [struct.pack(">i", len(block)), block]
        return b"".join(out)
    if codec == LZ4:
        return _lz4_frame(data, magic)
    if codec == ZSTD:  # Kafka's stream is flushed, then ended: its frame closes with an empty last block
        c = cramjam.zstd.Compressor(level=3)
        c.compress(data)
        return bytes(c.flush()) + bytes(c.finish())
    raise ValueError(f"unknown codec id {codec}")


def _lz4_frame(data: bytes, magic: int) -> bytes:
    """Kafka's LZ4 frame: FLG 0x60, BD 0x40 (64 KiB blocks), the magic-0 checksum quirk."""
    descriptor = bytes([0x60, 0x40])
    hashed = (LZ4_MAGIC + descriptor) if magic == 0 else descriptor
    out = [LZ4_MAGIC, descriptor, bytes([(xxhash.xxh32_intdigest(hashed) >> 8) & 0xFF])]
    for i in range(0, len(data), 64 * 1024):
        chunk = data[i:i + 64 * 1024]
        block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if len(block) >= len(chunk):
            out += [struct.pack("<I", len(chunk) | 0x80000000), chunk]
        else:
            out += [struct.pack("<I", len(block)), block]
    out.append(b"\x00\x00\x00\x00")
    return b"".join(out)
