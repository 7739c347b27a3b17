"""``pykbatch validate``: files of record batches checked with every culprit printed; index and state
files checked as what they are; a partition (or a log.dirs folder of them) audited whole."""
from __future__ import annotations

import json
import os

from pykbatch.config import ORIGINS, ValidationConfig
from pykbatch.log.files import LOG
from pykbatch.progress import Progress

from pykbatch.commands.common import (
    add_strict,
    DAMAGED, OK, UsageError, at_least_one, culprit_line, not_a_log, origin_of, print_capped, print_result,
    progress_enabled, tail_culprit, threads, topic_partition, folder_of, compacted_for,
)


def add_parser(sub) -> None:
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
    v.add_argument("--max-culprits", type=at_least_one, default=1000, metavar="N",
                   help="print at most N findings of each kind per file (all are counted; default 1000)")
    v.add_argument("--topic-partition", default=None, metavar="TOPIC-PARTITION",
                   help="the partition named in Kafka's messages (default: the file's folder's, as orders-0/, else t-0)")
    v.add_argument("--json", action="store_true", help="one JSON document per file")
    v.add_argument("--compacted", action="store_true",
                   help="the topic is compacted: every record needs a key, and offsets missing between batches are "
                        "the cleaner's (else they are lost records)")
    add_strict(v)
    v.add_argument("--bootstrap-server", default="<bootstrap-server>",
                   help="with --segment: named in the printed kafka-transactions.sh abort commands")
    v.add_argument("--jobs", type=threads, default=None, metavar="N",
                   help="with --segment: threads validating segments (default: the cores this process may use)")
    v.add_argument("--no-progress", action="store_true", help="no progress line on a terminal")
    v.add_argument("--producers", action="store_true",
                   help="also audit producer state: sequence gaps, duplicates, fencing, open transactions")
    v.set_defaults(run=_validate)


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
        config = ValidationConfig(origin=args.origin or origin_of(path), verify_crc=not args.no_crc,
                                  max_culprits=args.max_culprits,
                                  topic_partition=topic_partition(args.topic_partition, folder_of(path)),
                                  compacted=compacted_for(args, folder_of(path)))
        found += validate_file(path, config, args)
    return DAMAGED if found else OK


def _check_state_file(path: str, kind: str, args) -> int:
    """An index or state file handed to validate: checked as what it is (its log beside it, if
    any); returns how many problems."""
    from pykbatch.log.checks import KINDS, check_file
    from pykbatch.log.indexes import TxnIndex
    problems = check_file(path)
    if not problems and kind == TxnIndex.SUFFIX:  # and against the transactions its partition's log aborts
        from pykbatch.log import Partition
        from pykbatch.log.audit import txn_index_findings
        folder = folder_of(path)
        mine = os.path.abspath(path)
        problems = [p for p in txn_index_findings(Partition(folder).segment_paths,
                                                  topic_partition(args.topic_partition, folder))
                    if os.path.abspath(p.split(": ", 1)[0]) == mine]
    problems = args.verdict.found(problems)
    if getattr(args, "json", False):
        print(json.dumps({"file": path, "kind": KINDS[kind], "ok": not problems, "problems": problems}))
        return len(problems)
    print(f"{path}: {KINDS[kind]}, {'ok' if not problems else f'{len(problems)} problem(s)'}")
    print_capped(problems, args.max_culprits, "problem(s)")
    return len(problems)


def validate_file(path: str, config: ValidationConfig, args) -> int:
    """Validates one file and prints its culprits (JSON with --json); returns how many."""
    from pykbatch.log.segments import open_input
    producers = getattr(args, "producers", False)
    with open_input(path) as seg, Progress(seg.size, path, enabled=progress_enabled(args)) as meter:
        result = seg.validate(config, progress=meter.update)
        if not_a_log(path, result, seg.size):
            raise UsageError(f"{path}: no Kafka record batch or message in it (not a log segment, a produce "
                             "request or a batch?); index and state files are checked by their names "
                             "(.index, .timeindex, .txnindex, .snapshot, leader-epoch-checkpoint, partition.metadata)")
        audit = _audit(seg.view(), result, config.topic_partition) if producers else None
    tail = tail_culprit(path, result, seg.size)
    strict_tail = int(tail is not None and (tail.rule == "log.segment_truncated" or getattr(args, "strict", False)))
    args.verdict.found(result.culprit_count + strict_tail + (len(audit.culprits) if audit else 0))
    if getattr(args, "json", False):
        doc = {"file": path, **result.as_dict()}
        if tail is not None:
            doc["ok"] = doc["ok"] and not strict_tail
            doc["tail"] = tail.as_dict()
        if audit:
            doc["producer_culprits"] = [c.as_dict() for c in audit.culprits]
            doc["open_transactions"] = audit.open_transactions
        print(json.dumps(doc))
    else:
        print_result(path, result, tail)
        if audit:
            _print_audit(audit, args.max_culprits)
    return result.culprit_count + strict_tail + (len(audit.culprits) if audit else 0)


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
    if not os.path.isdir(args.segment):
        raise UsageError(f"--segment {args.segment}: not a directory (a partition's, or a log.dirs folder of them); "
                         f"a single file is checked by `pykbatch validate {args.segment}`")
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
    from pykbatch.log.audit import audit_partition
    config = ValidationConfig(origin="log", verify_crc=not args.no_crc, max_culprits=args.max_culprits,
                              topic_partition=topic_partition(args.topic_partition, directory),
                              compacted=compacted_for(args, directory))
    from pykbatch.log import Partition
    with Progress(len(Partition(directory).segment_paths), directory, unit="segments",
                  enabled=progress_enabled(args)) as meter:
        audit = audit_partition(directory, config, jobs=args.jobs, progress=meter.update)
    args.verdict.found(not audit.ok)
    cap = args.max_culprits
    if args.json:
        print(json.dumps({
            "directory": audit.directory, "ok": audit.ok, "gaps": audit.gaps, "compacted": config.compacted,
            "lost": [{"segment": path, **c.as_dict()} for path, c in audit.lost[:cap]],
            "overlaps": [dict(zip(("segment", "position", "previous_last_offset", "base_offset"), o))
                         for o in audit.overlaps[:cap]],
            "segments": [{"path": s.path, "base_offset": s.base_offset, "batches": s.batches,
                          "records": s.result.records, "first_offset": s.first_offset, "last_offset": s.last_offset,
                          "invalid_tail_bytes": s.invalid_tail_bytes, "lost_bytes": s.result.lost_bytes,
                          "tail_position": s.span.tail_position,
                          "read_error": s.read_error, "culprit_count": s.result.culprit_count,
                          "culprits": [c.as_dict() for c in s.result.culprits]} for s in audit.segments],
            "producer_culprits": [c.as_dict() for c in audit.producers.culprits[:cap]],
            "open_transactions": [t.as_dict(args.bootstrap_server) for t in audit.open_transactions],
            "index_problems": audit.index_problems[:cap],
            "left_out": {"overlaps": max(0, len(audit.overlaps) - cap), "lost": max(0, len(audit.lost) - cap),
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
    last = audit.segments[-1].path if audit.segments else None
    for s in audit.segments:
        if s.result.culprits or s.read_error or s.result.truncated_tail:
            print_result(s.path, s.result, segment="active" if s.path == last else "closed")
    gaps = ("the topic is compacted: the cleaner removes records" if config.compacted
            else "records missing: each named as log.offset_gap")
    print(f"offsets: {audit.gaps} gap(s) inside segments ({gaps}), {len(audit.overlaps)} overlap(s)")
    if audit.lost:
        print(f"lost between or at the end of segments: {len(audit.lost)}")
    print_capped((f"{os.path.basename(path)}: {culprit_line(c)}" for path, c in audit.lost), cap, "finding(s)")
    print_capped((f"{os.path.basename(path)} at byte {position}: base offset {base} after offset {prev}"
                   for path, position, prev, base in audit.overlaps), cap, "overlap(s)")
    for path, first in audit.below_base:
        print(f"  {os.path.basename(path)} starts at offset {first}, below its file name's")
    _print_audit(audit.producers, cap)
    for t in audit.open_transactions:  # they hold back read_committed consumers until they end
        age = f", begun {t.age_ms / 1000:.0f} s before the log's newest record" if t.age_ms is not None else ""
        if t.marker_unreadable_at is not None:  # it may have ended there: aborting it is not the answer
            print(f"  transaction of producer {t.producer_id} epoch {t.producer_epoch} since offset {t.first_offset}: "
                  f"undecided, its marker at offset {t.marker_unreadable_at} does not read (committed or aborted is "
                  f"not known: the broker's copy of that marker, or its replicas', decides)")
            continue
        print(f"  open transaction: producer {t.producer_id} epoch {t.producer_epoch} since offset {t.first_offset}"
              f"{age}; to abort it: {t.abort_command(args.bootstrap_server)}")
    print(f"indexes and state files: {'ok' if not audit.index_problems else f'{len(audit.index_problems)} problem(s)'}")
    print_capped(audit.index_problems, cap, "problem(s)")
    print(f"{audit.directory}: " + ("ok" if audit.ok else "problems found"))
    return OK if audit.ok else DAMAGED


def _audit(data, result, tp: str):
    """The producer-state audit of the batches before any framing loss."""
    from pykbatch.kafka.producer_state import audit_producers
    end = result.stopped_at if result.stopped_at is not None else result.valid_bytes
    return audit_producers(memoryview(data)[:end], tp)


def _print_audit(audit, cap: int) -> None:
    status = "ok" if audit.ok else f"{len(audit.culprits)} culprit(s)"
    print(f"  producer state: {len(audit.producers)} producer(s), "
          f"{len(audit.completed_transactions)} completed transaction(s), {status}")
    print_capped((f"batch {c.entry} at byte {c.position}: {c.name}({c.code}) {c.rule}: {c.message}"
                   for c in audit.culprits), cap, "producer culprit(s)")
    for pid, first in audit.open_transactions.items():
        print(f"  producer {pid}: transaction open since offset {first}")
