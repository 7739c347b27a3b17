"""Command line: ``pykbatch dump`` (kafka-dump-log compatible), ``validate``, ``repair``, ``sample``,
``rules``, ``tiered plan|export`` (a tiered-storage remote store read as the broker serves it).

Exit status (``EXIT_CODES``): 0 nothing wrong found; 1 damage found in the data (culprits,
damaged batches, index mismatches; everything readable was still printed); 2 the command could
not run: bad arguments, or an input that cannot be opened or an output that cannot be written.
A damaged file never ends a command in a traceback."""
from __future__ import annotations

import argparse
import json
import os
import sys

from pykbatch import _native
from pykbatch.config import ORIGINS, ValidationConfig
from pykbatch.log.files import LOG, STDIN
from pykbatch.progress import Progress


OK, DAMAGED, CANNOT_RUN = 0, 1, 2
EXIT_CODES = {
    OK: "nothing wrong found",
    DAMAGED: "damage found in the data (culprits, damaged batches, index mismatches); what was "
             "readable was still printed",
    CANNOT_RUN: "the command could not run: bad arguments, an input that cannot be opened, or an "
                "output that cannot be written",
}


class UsageError(Exception):
    """A command given what it cannot work with (exit status 2, as argparse's own errors)."""


def _jobs(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"--jobs takes a number of threads, at least 1, not {text}")
    return n


def _callable(spec: str):
    """A decoder given as ``module:function`` (the Python form of --value-decoder-class)."""
    import importlib
    module, _, name = spec.partition(":")
    if not name:
        raise UsageError(f"a decoder is given as module:function, not {spec!r}")
    return getattr(importlib.import_module(module), name)


def _dump_inputs(specs) -> list[str]:
    """The files of --files (comma lists; a partition directory stands for its files: each
    segment's log, then its indexes and snapshot, in offset order)."""
    from pykbatch.dump import can_dump
    from pykbatch.log import base_offset_of
    files = []
    for f in (f for spec in specs for f in spec.split(",") if f):
        if os.path.isdir(f):
            names = [n for n in os.listdir(f) if can_dump(n) and n.split(".")[0].isdigit()]
            files += [os.path.join(f, n) for n in sorted(names, key=lambda n: (base_offset_of(n), n))]
        else:
            files.append(f)
    return files


def _dump(args) -> int:
    from pykbatch.dump import STRUCTURED_DECODERS, can_dump, dump_files, dump_json, parser_for
    if args.to:
        files = [f for spec in args.files for f in spec.split(",") if f]
        return _export(files, *args.to, jobs=args.jobs, progress=not args.no_progress)
    files = _dump_inputs(args.files)
    if not files:
        raise UsageError(f"no files to dump in {', '.join(args.files)}")
    args.structured = next((n for n in STRUCTURED_DECODERS if getattr(args, f"decoder_{n.replace('-', '_')}")), None)
    decoders = {}
    if args.key_decoder:
        decoders["key_decoder"] = _callable(args.key_decoder)
    if args.value_decoder:
        decoders["value_decoder"] = _callable(args.value_decoder)
    print_data = args.print_data_log or bool(decoders) or bool(args.structured)
    if args.format == "text":
        problems = dump_files(files, deep=args.deep_iteration, print_data=print_data,
                              skip_metadata=args.skip_record_metadata, max_bytes=args.max_bytes,
                              verify_index_only=args.verify_index_only, index_sanity_check=args.index_sanity_check,
                              max_message_size=args.max_message_size, progress=not args.no_progress,
                              style=args.style, decoder=args.structured, **decoders)
    else:
        parser = parser_for(args.structured, **decoders) if decoders or args.structured else None
        problems = dump_json(files, lines=args.format == "jsonl", deep=args.deep_iteration, print_data=print_data,
                             max_bytes=args.max_bytes, parser=parser)
    if args.validate:
        for path in files:
            if path.endswith(LOG):
                problems += _validate_file(path, ValidationConfig(origin="log", compacted=args.compacted), args)
    if any(not can_dump(f) for f in files):
        return CANNOT_RUN  # each was named on stderr ("Ignoring unknown file"), as Kafka's tool does
    return DAMAGED if problems else OK


def _export(files, fmt: str, dest: str, jobs: int | None = None, progress: bool = True) -> int:
    """One .log file into a file, or a partition directory into a directory of files (one per segment)."""
    from pykbatch.export import FORMATS, export_partition, export_segment
    from pykbatch.log import Partition
    if fmt not in FORMATS:
        raise UsageError(f"--to takes a format ({' or '.join(FORMATS)}), then a file (a directory for a partition), "
                         f"not {fmt!r}")
    if len(files) == 1 and os.path.isdir(files[0]):
        logs = Partition(files[0]).segment_paths
        with Progress(len(logs), files[0], unit="segments", enabled=progress) as meter:
            done = export_partition(logs, dest, fmt, jobs=jobs, progress=meter.update)
        reports = [report for _, report in done]
        print(f"wrote {sum(r.rows for r in reports)} records of {len(logs)} segment(s) of {files[0]} to "
              f"{dest.rstrip('/')}/ ({fmt})")
    else:
        logs = [f for f in files if f.endswith(LOG)]
        if len(logs) != 1:
            raise UsageError("--to exports one .log file, or a partition directory")
        with Progress(os.path.getsize(logs[0]), logs[0], enabled=progress) as meter:
            reports = [export_segment(logs[0], dest, fmt, jobs=jobs, progress=meter.update)]
        print(f"wrote {reports[0].rows} records of {logs[0]} to {dest} ({fmt})")
    for log, report in zip(logs, reports):
        where = f" of {log}" if len(logs) > 1 else ""
        for position, entry, exc in report.damaged:
            print(f"left out batch {entry} at byte {position}{where}: records not readable {exc.line()}",
                  file=sys.stderr)
        for span in report.lost:
            print(f"left out {span.size} unreadable byte(s) at byte {span.position}{where} (the framing was lost; "
                  f"resumed at byte {span.position + span.size}): {span.error.line()}", file=sys.stderr)
        if report.stopped is not None:
            print(f"the walk of {log} stopped {report.stopped.line()}; nothing after it was exported",
                  file=sys.stderr)
    damaged = sum(len(r.damaged) for r in reports)
    if damaged:
        print(f"{damaged} damaged batch(es) left out of {dest}", file=sys.stderr)
    return OK if all(r.ok for r in reports) else DAMAGED


def _validate(args) -> int:
    if args.segment:
        return _validate_partition(args)
    if not args.files:
        raise UsageError("give FILEs (- for standard input) or --segment DIR")
    from pykbatch.log.checks import kind_of
    found = 0
    for path in args.files:
        if os.path.isdir(path):
            raise UsageError(f"{path} is a directory: audit a partition, or a log.dirs folder of partitions, "
                             f"with --segment {path}")
        kind = kind_of(path)
        if kind is not None and kind != LOG:
            found += _check_state_file(path, kind, args)
            continue
        config = ValidationConfig(origin=args.origin or _origin_of(path), verify_crc=not args.no_crc,
                                  max_culprits=args.max_culprits, topic_partition=args.topic_partition,
                                  compacted=args.compacted)
        found += _validate_file(path, config, args)
    return DAMAGED if found else OK


def _progress(args) -> bool:
    """Whether a progress line may be shown (on a terminal, for large work) for this command."""
    return not getattr(args, "no_progress", False)


def _origin_of(path: str) -> str:
    """The checks a file gets unless --origin says: a log's for a segment (or standard input),
    a producer's for anything else (a produce request's records, a sample)."""
    return "log" if path.endswith(LOG) or path == STDIN else "client"


def _check_state_file(path: str, kind: str, args) -> int:
    """An index or state file handed to validate: checked as what it is (its log beside it, if
    any); returns how many problems."""
    from pykbatch.log.checks import KINDS, check_file
    problems = check_file(path)
    if getattr(args, "json", False):
        print(json.dumps({"file": path, "kind": KINDS[kind], "ok": not problems, "problems": problems}))
        return len(problems)
    print(f"{path}: {KINDS[kind]}, {'ok' if not problems else f'{len(problems)} problem(s)'}")
    _print_capped(problems, args.max_culprits, "problem(s)")
    return len(problems)


def _not_a_log(path: str, result, size: int) -> bool:
    """Nothing in a file not named as a log reads as an entry: it is some other kind of file."""
    return size > 0 and not path.endswith(LOG) and result.stopped_at == 0 and result.lost_bytes == size


def _validate_file(path: str, config: ValidationConfig, args) -> int:
    """Validates one file and prints its culprits (JSON with --json); returns how many."""
    from pykbatch.log.segments import open_input
    producers = getattr(args, "producers", False)
    with open_input(path) as seg, Progress(seg.size, path, enabled=_progress(args)) as meter:
        result = seg.validate(config, progress=meter.update)
        if _not_a_log(path, result, seg.size):
            raise UsageError(f"{path}: no Kafka record batch or message in it (not a log segment, a produce "
                             "request or a batch?); index and state files are checked by their names "
                             "(.index, .timeindex, .txnindex, .snapshot, leader-epoch-checkpoint, partition.metadata)")
        audit = _audit(seg.view(), result, config.topic_partition) if producers else None
    if getattr(args, "json", False):
        doc = {"file": path, "ok": result.ok, "entries": result.entries,
               "records": result.records, "culprit_count": result.culprit_count,
               "error_code": result.error_code, "error_name": result.error_name,
               "truncated_tail": result.truncated_tail._asdict() if result.truncated_tail else None,
               "lost_bytes": result.lost_bytes,
               "culprits": [c.as_dict() for c in result.culprits]}
        if audit:
            doc["producer_culprits"] = [c.as_dict() for c in audit.culprits]
            doc["open_transactions"] = audit.open_transactions
        print(json.dumps(doc))
    else:
        _print_result(path, result)
        if audit:
            _print_audit(audit, args.max_culprits)
    return result.culprit_count + (len(audit.culprits) if audit else 0)


def _print_capped(lines, cap: int, what: str, indent: str = "  ") -> None:
    """Per-finding lines, at most ``cap`` of them, then how many more were left out."""
    lines = list(lines)
    for line in lines[:cap]:
        print(f"{indent}{line}")
    if len(lines) > cap:
        print(f"{indent}... {len(lines) - cap} more {what} not shown (--max-culprits)")


def _print_result(path: str, result) -> None:
    status = "ok" if result.ok else f"{result.culprit_count} culprit(s)"
    print(f"{path}: {result.batches} batches, {result.records} records, {status}")
    for c in result.culprits:
        rec = f" record {c.record_index}" if c.record_index is not None else ""
        off = f" (offset delta {c.relative_offset})" if c.relative_offset is not None else ""
        detail = f" ({c.detail})" if c.detail else ""
        print(f"  batch {c.entry}{rec}{off} at byte {c.position}: {c.name}({c.code}) {c.rule}: "
              f"{c.message}{detail}")
    if result.culprit_count > len(result.culprits):
        print(f"  ... {result.culprit_count - len(result.culprits)} more not shown (--max-culprits)")
    if result.lost_bytes:
        print(f"  {result.lost_bytes} unreadable byte(s) skipped where the framing was lost; the batches after "
              "them were read")
    if result.truncated_tail:
        t = result.truncated_tail
        print(f"  incomplete trailing entry {t.entry} at byte {t.position} (not an error)")
    if result.unwalked_batches:
        print(f"  note: records of {result.unwalked_batches} compressed batch(es) were not checked")


def _partition_dirs(directory: str) -> list[str]:
    """``[directory]`` when it holds segments (a partition), else the sub-directories that do (a
    log.dirs folder)."""
    from pykbatch.log import is_segment_file

    def holds_segments(d: str) -> bool:
        return any(is_segment_file(n, LOG) for n in os.listdir(d))
    if holds_segments(directory):
        return [directory]
    found = sorted(os.path.join(directory, n) for n in os.listdir(directory)
                   if os.path.isdir(os.path.join(directory, n)) and holds_segments(os.path.join(directory, n)))
    if not found:
        raise UsageError(f"{directory}: no log segments (<offset>.log) in it, nor partition directories holding them")
    return found


def _validate_partition(args) -> int:
    """A partition directory: a table per segment, then offsets, producer state and indexes.  A
    log.dirs folder: each partition in it, then a summary."""
    partitions = _partition_dirs(args.segment)
    if partitions == [args.segment]:
        return _audit_one(args.segment, args)
    statuses = [(d, _audit_one(d, args, heading=True)) for d in partitions]
    bad = [d for d, status in statuses if status != OK]
    if not args.json:
        print(f"{args.segment}: {len(statuses)} partition(s), "
              + ("ok" if not bad else f"problems in {len(bad)}: {', '.join(os.path.basename(d) for d in bad)}"))
    return DAMAGED if bad else OK


def _audit_one(directory: str, args, heading: bool = False) -> int:
    from pykbatch.audit import audit_partition
    config = ValidationConfig(origin="log", verify_crc=not args.no_crc, max_culprits=args.max_culprits,
                              topic_partition=args.topic_partition, compacted=args.compacted)
    from pykbatch.log import Partition
    with Progress(len(Partition(directory).segment_paths), directory, unit="segments",
                  enabled=_progress(args)) as meter:
        audit = audit_partition(directory, config, jobs=args.jobs, progress=meter.update)
    cap = args.max_culprits
    if args.json:
        print(json.dumps({
            "directory": audit.directory, "ok": audit.ok, "gaps": audit.gaps,
            "overlaps": [dict(zip(("segment", "position", "previous_last_offset", "base_offset"), o))
                         for o in audit.overlaps[:cap]],
            "segments": [{"path": s.path, "base_offset": s.base_offset, "batches": s.batches,
                          "records": s.result.records, "first_offset": s.first_offset, "last_offset": s.last_offset,
                          "invalid_tail_bytes": s.invalid_tail_bytes, "lost_bytes": s.result.lost_bytes,
                          "read_error": s.read_error, "culprit_count": s.result.culprit_count,
                          "culprits": [c.as_dict() for c in s.result.culprits]} for s in audit.segments],
            "producer_culprits": [c.as_dict() for c in audit.producers.culprits[:cap]],
            "open_transactions": [t.as_dict(args.bootstrap_server) for t in audit.open_transactions],
            "index_problems": audit.index_problems[:cap],
            "left_out": {"overlaps": max(0, len(audit.overlaps) - cap),
                         "producer_culprits": max(0, len(audit.producers.culprits) - cap),
                         "index_problems": max(0, len(audit.index_problems) - cap)}}))
        return OK if audit.ok else DAMAGED
    if heading:
        print(f"\n{audit.directory}")
    print(f"{'segment':<28} {'batches':>8} {'records':>9} {'culprits':>9} {'tail':>6}  offsets")
    for s in audit.segments:
        span = f"{s.first_offset}-{s.last_offset}" if s.first_offset is not None else "-"
        print(f"{os.path.basename(s.path):<28} {s.batches:>8} {s.result.records:>9} {s.result.culprit_count:>9} "
              f"{s.invalid_tail_bytes:>6}  {span}")
    for s in audit.segments:
        if s.result.culprits or s.read_error:
            _print_result(s.path, s.result)
    print(f"offsets: {audit.gaps} gap(s) (compaction removes records), {len(audit.overlaps)} overlap(s)")
    _print_capped((f"{os.path.basename(path)} at byte {position}: base offset {base} after offset {prev}"
                   for path, position, prev, base in audit.overlaps), cap, "overlap(s)")
    for path, first in audit.below_base:
        print(f"  {os.path.basename(path)} starts at offset {first}, below its file name's")
    _print_audit(audit.producers, cap)
    for t in audit.open_transactions:  # they hold back read_committed consumers until they end
        age = f", begun {t.age_ms / 1000:.0f} s before the log's newest record" if t.age_ms is not None else ""
        print(f"  open transaction: producer {t.producer_id} epoch {t.producer_epoch} since offset {t.first_offset}"
              f"{age}; to abort it: {t.abort_command(args.bootstrap_server)}")
    print(f"indexes and state files: {'ok' if not audit.index_problems else f'{len(audit.index_problems)} problem(s)'}")
    _print_capped(audit.index_problems, cap, "problem(s)")
    print(f"{audit.directory}: " + ("ok" if audit.ok else "problems found"))
    return OK if audit.ok else DAMAGED


def _repair(args) -> int:
    """A new segment without the culprits, and a dead-letter file of what was removed."""
    from pykbatch.repair import repair_segment
    if args.file != STDIN and os.path.abspath(args.out) == os.path.abspath(args.file):
        raise UsageError("repair never writes over its input: give another --out")
    from pykbatch.log.checks import KINDS, kind_of
    kind = kind_of(args.file)
    if kind is not None and kind != LOG:
        raise UsageError(f"{args.file} is a {KINDS[kind]}, not a log segment: `pykbatch validate {args.file}` "
                         "checks it")
    from pykbatch.log.segments import open_input
    config = ValidationConfig(origin=args.origin or _origin_of(args.file), compacted=args.compacted,
                              topic_partition=args.topic_partition)
    with open_input(args.file) as seg, Progress(seg.size, args.file, enabled=_progress(args)) as meter:
        report = repair_segment(seg, args.out, args.dead_letter, config, progress=meter.update)
        if _not_a_log(args.file, report.result, seg.size):
            os.remove(args.out)
            if args.dead_letter:
                os.remove(args.dead_letter)
            raise UsageError(f"{args.file}: no Kafka record batch or message in it: nothing to repair (not a log "
                             "segment?)")
    print(f"{args.file}: kept {report.kept_batches} batches, dropped {report.dropped_records} record(s) and "
          f"{report.dropped_batches} batch(es), {report.unreadable_bytes} unreadable byte(s)"
          + (f", {report.truncated_tail_bytes} byte(s) of an incomplete tail" if report.truncated_tail_bytes else ""))
    print(f"wrote {args.out}" + (f"; dead letters in {args.dead_letter}" if args.dead_letter else ""))
    return DAMAGED if report.result.culprit_count else OK


def _audit(data, result, topic_partition):
    """The producer-state audit of the batches before any framing loss."""
    from pykbatch.producer_state import audit_producers
    end = result.stopped_at if result.stopped_at is not None else result.valid_bytes
    return audit_producers(memoryview(data)[:end], topic_partition)


def _print_audit(audit, cap: int) -> None:
    status = "ok" if audit.ok else f"{len(audit.culprits)} culprit(s)"
    print(f"  producer state: {len(audit.producers)} producer(s), "
          f"{len(audit.completed_transactions)} completed transaction(s), {status}")
    _print_capped((f"batch {c.entry} at byte {c.position}: {c.name}({c.code}) {c.rule}: {c.message}"
                   for c in audit.culprits), cap, "producer culprit(s)")
    for pid, first in audit.open_transactions.items():
        print(f"  producer {pid}: transaction open since offset {first}")


def _redpanda(args) -> int:
    """Redpanda native segments: every batch with its type and both CRCs, non-data batches by
    type, then the raft_data batches re-framed as Kafka batches through the validator."""
    from pykbatch import redpanda
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
        report = redpanda.Report()
        rows = [b for b in redpanda.batches(data, report)]
        kafka = b"".join(b.to_kafka() for b in rows if b.type == redpanda.RAFT_DATA)
        result = _native.validate(kafka, ValidationConfig(origin="log"))
        problems += len(report.faults) + result.culprit_count
        if args.to:
            from pykbatch.export import export_segment
            import io
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
            _print_result(path, result)
    return CANNOT_RUN if refused else DAMAGED if problems else OK


def _count(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"takes a number, at least 1, not {text}")
    return n


def _sample(args) -> int:
    from pykbatch.samples import FAULTS, iter_sample_batches
    with open(args.out, "wb") as f, Progress(args.batches, args.out, unit="batches",
                                             enabled=_progress(args) and args.batches >= 10_000) as meter:
        for n, batch in enumerate(iter_sample_batches(args.batches), 1):
            f.write(batch)
            if n % 1000 == 0:
                meter.update(n)
    print(f"wrote {args.batches} batches to {args.out}; damaged on purpose:")
    for i, what in FAULTS.items():
        if i < args.batches:
            print(f"  batch {i}: {what}")
    return 0


def _rules(args) -> int:
    """The catalogue of rules (csrc/kb_rules.def): every rule pykbatch reports."""
    from pykbatch import errors
    from pykbatch.rules import RULES
    rows = [{"rule": r.id, "code": r.code, "name": errors.error_name(r.code), "stage": r.stage, "kafka": r.kafka,
             "per_record": r.record_error, "message": r.template, "detail": r.detail} for r in RULES[1:]
            if not args.prefix or r.id.startswith(args.prefix)]
    if not rows:
        raise UsageError(f"no rule id starts with {args.prefix!r} (`pykbatch rules` lists them all)")
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        flags = ("" if row["kafka"] else " strict") + (" per-record" if row["per_record"] else "")
        print(f"{row['rule']}  {row['name']}({row['code']}) {row['stage']}{flags}")
        print(f"    {row['message']}" + (f" ({row['detail']})" if row["detail"] else ""))
    return 0


class _PrintVersion(argparse.Action):
    """--version, printed as one line (argparse's own action re-wraps it to the terminal)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(_version_line())
        parser.exit()


def _version_line() -> str:
    """pykbatch's version, and which kernels the native core picked on this machine."""
    from pykbatch import __version__, native_info
    info = native_info()
    return (f"pykbatch {__version__} (CRC-32C {info['crc32c']}, CRC-32 {info['crc32']}; magics "
            f"{', '.join(map(str, info['magics']))}; codecs {', '.join(info['codecs'])}; {info['rules']} rules)")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pykbatch", description="Read, check and repair Kafka record batches.",
        epilog="exit status: " + "; ".join(f"{code} {what}" for code, what in EXIT_CODES.items()))
    p.add_argument("--version", action=_PrintVersion, help="print the version and the native kernels in use, then exit")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("dump", help="print log, index and state files as kafka-dump-log.sh does")
    d.add_argument("--files", action="append", required=True, metavar="FILE[,FILE...]",
                   help="log (.log, KRaft .checkpoint), index (.index, .timeindex, .txnindex) and producer snapshot "
                        "files, comma-separated or repeated; a partition directory stands for all of its files")
    d.add_argument("--deep-iteration", action="store_true", help="print every record")
    d.add_argument("--print-data-log", action="store_true", help="print keys and values (implies deep)")
    d.add_argument("--skip-record-metadata", action="store_true",
                   help="with --print-data-log: print keys and values only, not offsets, sizes and headers")
    d.add_argument("--max-bytes", type=int, default=None, help="read only the first N bytes of .log files")
    d.add_argument("--verify-index-only", action="store_true", help="index files: check entries, print none")
    d.add_argument("--index-sanity-check", action="store_true",
                   help="index files: run the broker's start-up sanity check only")
    d.add_argument("--max-message-size", type=int, default=5 * 1024 * 1024,
                   help="bytes read at an offset-index entry's position to find its batch")
    d.add_argument("--format", choices=("text", "json", "jsonl"), default="text",
                   help="text: kafka-dump-log's lines; json: one document; jsonl: one object per batch/record")
    d.add_argument("--to", nargs=2, metavar=("FORMAT", "FILE"), default=None,
                   help="export the records of one .log file with their batch columns: parquet or arrow; of a "
                        "partition directory: into a directory, a file per segment")
    d.add_argument("--jobs", type=_jobs, default=None, metavar="N",
                   help="with --to: threads decoding ahead of the writer (default: the cores this process may use)")
    d.add_argument("--validate", action="store_true", help="also print the validator's culprits for .log files")
    d.add_argument("--compacted", action="store_true", help="with --validate: the topic is compacted")
    d.add_argument("--no-progress", action="store_true", help="no progress line on a terminal")
    d.add_argument("--style", choices=("java", "scala"), default="java",
                   help="print as kafka-dump-log of Kafka 4.3+ (java, default) or of 4.2 and earlier (scala)")
    d.add_argument("--key-decoder", "--key-decoder-class", metavar="MODULE:FUNCTION", default=None,
                   help="a Python callable bytes -> str for keys (implies --print-data-log)")
    d.add_argument("--value-decoder", "--value-decoder-class", metavar="MODULE:FUNCTION", default=None,
                   help="a Python callable bytes -> str for values (implies --print-data-log)")
    from pykbatch.dump import STRUCTURED_DECODERS
    for name in STRUCTURED_DECODERS:  # with several, the first in Kafka's order wins, as in its tool
        d.add_argument(f"--{name}-decoder", dest=f"decoder_{name.replace('-', '_')}", action="store_true",
                       help=f"decode {name} records as kafka-dump-log does (implies --print-data-log)")
    d.set_defaults(run=_dump)

    v = sub.add_parser("validate", help="check files of record batches and print every culprit")
    v.add_argument("files", nargs="*", metavar="FILE",
                   help="files of record batches (a .log segment, a produce request's records, - for standard "
                        "input); an index or state file is checked as what it is")
    v.add_argument("--segment", metavar="DIR", default=None,
                   help="audit a partition directory (segments, offsets, producer state, indexes, snapshots, "
                        "checkpoints), or every partition of a log.dirs folder")
    v.add_argument("--origin", choices=ORIGINS, default=None,
                   help="client: a producer's batches; log: batches from a log (default for *.log files and "
                        "standard input)")
    v.add_argument("--no-crc", action="store_true", help="skip CRC checks")
    v.add_argument("--max-culprits", type=_count, default=1000, metavar="N",
                   help="print at most N findings of each kind per file (all are counted; default 1000)")
    v.add_argument("--topic-partition", default="t-0", metavar="TOPIC-PARTITION",
                   help="the partition named in Kafka's messages (default t-0)")
    v.add_argument("--json", action="store_true", help="one JSON document per file")
    v.add_argument("--compacted", action="store_true", help="the topic is compacted: every record needs a key")
    v.add_argument("--bootstrap-server", default="<bootstrap-server>",
                   help="with --segment: named in the printed kafka-transactions.sh abort commands")
    v.add_argument("--jobs", type=_jobs, default=None, metavar="N",
                   help="with --segment: threads validating segments (default: the cores this process may use)")
    v.add_argument("--no-progress", action="store_true", help="no progress line on a terminal")
    v.add_argument("--producers", action="store_true",
                   help="also audit producer state: sequence gaps, duplicates, fencing, open transactions")
    v.set_defaults(run=_validate)

    r = sub.add_parser("repair", help="write a segment without its culprits, and a dead-letter file")
    r.add_argument("file", metavar="FILE", help="the segment to repair (- for standard input); never modified")
    r.add_argument("--out", required=True, metavar="FILE", help="the repaired segment (never the input)")
    r.add_argument("--dead-letter", metavar="FILE", default=None,
                   help="JSON lines: every removed record or batch with its culprits and bytes")
    r.add_argument("--origin", choices=ORIGINS, default=None,
                   help="which of Kafka's checks apply, as for validate: log for *.log files and standard input, "
                        "client (a producer's batches) for others")
    r.add_argument("--compacted", action="store_true", help="the topic is compacted: keyless records go")
    r.add_argument("--no-progress", action="store_true", help="no progress line on a terminal")
    r.add_argument("--topic-partition", default="t-0", metavar="TOPIC-PARTITION",
                   help="the partition named in Kafka's messages and the dead letters (default t-0)")
    r.set_defaults(run=_repair)

    s = sub.add_parser("sample", help="write sample batches (some damaged on purpose) to a file")
    s.add_argument("--out", required=True, metavar="FILE", help="where to write the sample")
    s.add_argument("--batches", type=_count, default=20, metavar="N",
                   help="how many batches (default 20; four are damaged: see the printed list)")
    s.add_argument("--no-progress", action="store_true", help="no progress line on a terminal")
    s.set_defaults(run=_sample)

    rl = sub.add_parser("rules", help="list every rule pykbatch checks: id, Kafka's code, stage, message")
    rl.add_argument("prefix", nargs="?", default="", help="only the rules whose id starts so (e.g. record.)")
    rl.add_argument("--json", action="store_true", help="a JSON array")
    rl.set_defaults(run=_rules)

    rp = sub.add_parser("redpanda", help="read Redpanda native segments: its batch headers, then Kafka's checks")
    rp.add_argument("files", nargs="+", metavar="FILE", help="Redpanda segment files (<offset>-<term>-v1.log)")
    rp.add_argument("--json", action="store_true", help="one JSON document per file")
    rp.add_argument("--to", nargs=2, metavar=("FORMAT", "FILE"), default=None,
                    help="export the raft_data records of one file: parquet or arrow")
    rp.set_defaults(run=_redpanda)

    from pykbatch.tiered.commands import add_parser as add_tiered
    add_tiered(sub)
    return p


def _inputs(args) -> list[str]:
    specs = getattr(args, "files", None) or ()
    files = [f for spec in specs for f in (spec.split(",") if args.command == "dump" else [spec]) if f]
    if getattr(args, "file", None):
        files.append(args.file)
    if getattr(args, "segment", None):
        files.append(args.segment)
    store = getattr(args, "store", None)
    if store and ("://" not in store or store.startswith("file://")):  # a local store (URLs are fsspec's)
        files.append(store[len("file://"):] if store.startswith("file://") else store)
    return files


def main(argv=None) -> int:
    """Runs one command; returns its exit status (``EXIT_CODES``)."""
    p = parser()
    args = p.parse_args(argv)
    for path in _inputs(args):  # said once, up front, instead of an OSError half way through
        if path != STDIN and not os.path.exists(path):
            print(f"pykbatch {args.command}: {path}: no such file or directory", file=sys.stderr)
            return CANNOT_RUN
    try:
        return args.run(args)
    except BrokenPipeError:  # the reader went away (| head): stop quietly, as coreutils do
        _silence_stdout()
        return OK
    except (UsageError, OSError, ImportError) as exc:  # not the data's problem: the command line, the machine's
        print(f"pykbatch {args.command}: error: {exc}", file=sys.stderr)
        return CANNOT_RUN


def _silence_stdout() -> None:
    """After a closed pipe: stdout pointed at /dev/null, so the interpreter's final flush of what
    is still buffered does not fail again on the way out."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
