"""``kafka-dump-log.sh``-compatible output for log files (SPEC.md section 11.2)."""
from __future__ import annotations

import mmap
import os
import sys
from typing import Callable, TextIO

from . import _native
from .control import parse_control

Decoder = Callable[[bytes], str]


def utf8(data: bytes) -> str:
    """Kafka's default StringDecoder: UTF-8, malformed input replaced."""
    return data.decode("utf-8", "replace")


def _bool(b: bool) -> str:
    return "true" if b else "false"


def batch_line(b) -> str:
    if b.magic < 2:
        return (f"offset: {b.last_offset} position: {b.position} {b.timestamp_type}: {b.max_timestamp} "
                f"size: {b.size} magic: {b.magic} compresscodec: {b.compression} crc: {b.crc} "
                f"isvalid: {_bool(b.is_valid)}")
    horizon = "OptionalLong.empty" if b.delete_horizon_ms is None else f"OptionalLong[{b.delete_horizon_ms}]"
    return (f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {b.record_count} "
            f"baseSequence: {b.base_sequence} lastSequence: {b.last_sequence} producerId: {b.producer_id} "
            f"producerEpoch: {b.producer_epoch} partitionLeaderEpoch: {b.partition_leader_epoch} "
            f"isTransactional: {_bool(b.is_transactional)} isControl: {_bool(b.is_control)} "
            f"deleteHorizonMs: {horizon} position: {b.position} {b.timestamp_type}: {b.max_timestamp} "
            f"size: {b.size} magic: {b.magic} compresscodec: {b.compression} crc: {b.crc} "
            f"isvalid: {_bool(b.is_valid)}")


def record_line(b, r, *, print_data: bool, skip_metadata: bool, key_decoder: Decoder,
                value_decoder: Decoder) -> str:
    parts = []
    if not skip_metadata:
        key_size = -1 if r.key is None else len(r.key)
        value_size = -1 if r.value is None else len(r.value)
        parts.append(f"| offset: {r.offset} {b.timestamp_type}: {r.timestamp} keySize: {key_size} "
                     f"valueSize: {value_size}")
        if b.magic >= 2:
            parts.append(f" sequence: {r.sequence} headerKeys: [{','.join(k for k, _ in r.headers)}]")
        else:
            parts.append(f" isValid: {_bool(r.is_valid)} crc: {r.crc}}}")  # sic: Kafka prints the brace
        if b.is_control:
            ctl = parse_control(r.key, r.value)
            if ctl.coordinator_epoch is not None:
                parts.append(f" endTxnMarker: {ctl.type_name} coordinatorEpoch: {ctl.coordinator_epoch}")
            else:
                parts.append(f" controlType: {ctl.type_name}({ctl.type})")
    if print_data and not b.is_control:
        if r.key is not None:
            parts.append(f"{'|' if skip_metadata else ''} key: {key_decoder(r.key)}")
        if r.value is not None:
            parts.append(f" payload: {value_decoder(r.value)}")
    return "".join(parts)


def dump_log(path: str, out: TextIO | None = None, err: TextIO | None = None, *, deep: bool = False,
             print_data: bool = False, skip_metadata: bool = False, max_bytes: int | None = None,
             key_decoder: Decoder = utf8, value_decoder: Decoder = utf8) -> int:
    """Print one ``.log`` file as kafka-dump-log does; returns the number of problems met."""
    out = out or sys.stdout
    err = err or sys.stderr
    deep = deep or print_data
    name = os.path.basename(path)
    out.write(f"Dumping {path}\n")
    stem = name.split(".")[0]
    if stem.isdigit():
        out.write(f"Log starting offset: {int(stem)}\n")
    size = os.path.getsize(path)
    if size == 0:
        return 0
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        with memoryview(mm) as view, view[:max_bytes] as data:
            return _dump_entries(path, data, size, out, err, deep, print_data, skip_metadata,
                                 max_bytes is not None, key_decoder, value_decoder)


def _dump_entries(path, data, size, out, err, deep, print_data, skip_metadata, limited, key_decoder,
                  value_decoder) -> int:
    problems = 0
    valid_bytes = 0
    pairs = []
    last_offset = None
    reader = _native.iter_batches(data, verify_crc=False)
    try:
        for b in reader:
            out.write(batch_line(b) + "\n")
            if deep:
                for r in b:
                    if last_offset is not None and r.offset != last_offset + 1:
                        pairs.append((last_offset, r.offset))
                    last_offset = r.offset
                    out.write(record_line(b, r, print_data=print_data, skip_metadata=skip_metadata,
                                          key_decoder=key_decoder, value_decoder=value_decoder) + "\n")
            valid_bytes = b.position + b.size
            del b
    except ValueError as exc:  # a KafkaDataError: the dump stops here, as Kafka's does
        err.write(f"Error while dumping {path}: {exc}\n")
        problems += 1
    if not limited and size - valid_bytes > 0:
        out.write(f"Found {size - valid_bytes} invalid bytes at the end of {os.path.basename(path)}\n")
    if pairs:
        err.write(f"Non-consecutive offsets in {os.path.abspath(path)}\n")
        for a, b in reversed(pairs):
            err.write(f"  {a} is followed by {b}\n")
    return problems
