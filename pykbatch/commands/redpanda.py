"""``pykbatch redpanda``: Redpanda native segments, its batch headers printed, then Kafka's checks."""
from __future__ import annotations

import io
import json
import sys

from pykbatch.commands.common import CANNOT_RUN, DAMAGED, OK, UsageError, print_result


def add_parser(sub) -> None:
    rp = sub.add_parser("redpanda", help="read Redpanda native segments: its batch headers, then Kafka's checks")
    rp.add_argument("files", nargs="+", metavar="FILE", help="Redpanda segment files (<offset>-<term>-v1.log)")
    rp.add_argument("--json", action="store_true", help="one JSON document per file")
    rp.add_argument("--to", nargs=2, metavar=("FORMAT", "FILE"), default=None,
                    help="export the raft_data records of one file: parquet or arrow")
    rp.set_defaults(run=_redpanda)


def _redpanda(args) -> int:
    """Redpanda native segments: every batch with its type and both CRCs, non-data batches by
    type, then the raft_data batches re-framed as Kafka batches through the validator."""
    from pykbatch.log import redpanda
    if args.to and len(args.files) != 1:
        raise UsageError("--to exports one file")
    problems, refused = 0, False
    for path in args.files:
        with open(path, "rb") as f:
            data = f.read()
        if not redpanda.is_native(data):
            print(f"{path}: not a Redpanda native segment (no batch header with a matching header CRC at byte 0); "
                  "a Kafka segment is read by pykbatch dump and validate", file=sys.stderr)
            refused = True
            continue
        reading = redpanda.read(data)
        rows, report, kafka, result = reading.batches, reading.report, reading.kafka, reading.result
        problems += args.verdict.found(reading.problems)
        if args.to:
            from pykbatch.log.export import export_segment
            export_segment(io.BytesIO(kafka), args.to[1], args.to[0])
        if args.json:
            print(json.dumps({"file": path, "batches": [{"position": b.position, "base_offset": b.base_offset,
                                                         "last_offset": b.base_offset + b.last_offset_delta,
                                                         "type": b.type_name, "records": b.record_count,
                                                         "header_crc_ok": True, "kafka_crc_ok": b.kafka_crc_ok}
                                                        for b in rows],
                              "non_data": [dict(zip(("position", "base_offset", "type", "records"), n))
                                           for n in report.non_data],
                              "faults": [dict(zip(("position", "rule", "message"), x)) for x in report.faults],
                              "zero_padding": report.zero_padding,
                              "culprits": [c.as_dict() for c in result.culprits]}))
            continue
        print(f"Dumping {path} (Redpanda native)")
        for b in rows:
            print(f"position: {b.position} baseOffset: {b.base_offset} lastOffset: {b.base_offset + b.last_offset_delta} "
                  f"count: {b.record_count} type: {b.type_name}({b.type}) size: {b.size} "
                  f"kafkaCrc: {'ok' if b.kafka_crc_ok else 'MISMATCH'}")
        for position, rule, message in report.faults:
            print(f"  at byte {position}: {rule}: {message}")
        if report.zero_padding:
            print(f"  {report.zero_padding} zero bytes after the last batch (preallocated)")
        if result.culprits:
            print_result(path, result)
    return CANNOT_RUN if refused else DAMAGED if problems else OK
