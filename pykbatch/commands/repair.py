"""``pykbatch repair``: a new segment without the culprits, and a dead-letter file of what was removed."""
from __future__ import annotations

import os

from pykbatch.config import ORIGINS, ValidationConfig
from pykbatch.log.files import LOG, STDIN
from pykbatch.progress import Progress

from pykbatch.commands.common import (
    add_strict,
    DAMAGED, OK, UsageError, culprit_line, not_a_log, origin_of, output_path, progress_enabled, tail_culprit,
    topic_partition, folder_of, compacted_for,
)


def add_parser(sub) -> None:
    r = sub.add_parser("repair", help="write a segment without its culprits, and a dead-letter file")
    r.add_argument("file", metavar="FILE", help="the segment to repair (- for standard input); never modified")
    r.add_argument("--out", required=True, metavar="FILE", help="the repaired segment (never the input)")
    r.add_argument("--dead-letter", metavar="FILE", default=None,
                   help="JSON lines: every removed record or batch with its culprits and bytes")
    r.add_argument("--origin", choices=ORIGINS, default=None,
                   help="which of Kafka's checks apply, as for validate: log for *.log files and standard input, "
                        "client (a producer's batches) for others")
    r.add_argument("--compacted", action="store_true", help="the topic is compacted: keyless records go")
    add_strict(r)
    r.add_argument("--no-progress", action="store_true", help="no progress line on a terminal")
    r.add_argument("--topic-partition", default=None, metavar="TOPIC-PARTITION",
                   help="the partition named in Kafka's messages and the dead letters (default: the file's folder's, "
                        "as orders-0/, else t-0)")
    r.set_defaults(run=_repair)


def _repair(args) -> int:
    """A new segment without the culprits, and a dead-letter file of what was removed."""
    from pykbatch.repair import InputAsOutputError, refuse_input_as_output, repair_segment
    output_path(args.out, "--out")
    if args.dead_letter:
        output_path(args.dead_letter, "--dead-letter")
    try:  # refused before anything is opened for writing: the input stays whole
        refuse_input_as_output(None if args.file == STDIN else args.file, args.out, args.dead_letter)
    except InputAsOutputError as exc:
        raise UsageError(str(exc)) from None
    from pykbatch.log.checks import KINDS, kind_of
    kind = kind_of(args.file)
    if kind is not None and kind != LOG:
        raise UsageError(f"{args.file} is a {KINDS[kind]}, not a log segment: `pykbatch validate {args.file}` "
                         "checks it")
    from pykbatch.log.segments import open_input
    config = ValidationConfig(origin=args.origin or origin_of(args.file), compacted=compacted_for(args, folder_of(args.file)),
                              topic_partition=topic_partition(args.topic_partition, folder_of(args.file)))
    with open_input(args.file) as seg, Progress(seg.size, args.file, enabled=progress_enabled(args)) as meter:
        report = repair_segment(seg, args.out, args.dead_letter, config, progress=meter.update)
        if not_a_log(args.file, report.result, seg.size):
            os.remove(args.out)
            if args.dead_letter:
                os.remove(args.dead_letter)
            raise UsageError(f"{args.file}: no Kafka record batch or message in it: nothing to repair (not a log "
                             "segment?)")
        tail = tail_culprit(args.file, report.result, seg.size)
    cut = tail is not None and (tail.rule == "log.segment_truncated" or args.strict)
    args.verdict.found(report.result.culprit_count + cut)
    print(f"{args.file}: kept {report.kept_batches} batches, dropped {report.dropped_records} record(s) and "
          f"{report.dropped_batches} batch(es), {report.unreadable_bytes} unreadable byte(s)"
          + (f", {report.truncated_tail_bytes} byte(s) of an incomplete tail" if report.truncated_tail_bytes else "")
          + (f"; {report.empty_batches} empty batch(es) keep the offsets of what was dropped"
             if report.empty_batches else ""))
    print(f"wrote {args.out}" + (f"; dead letters in {args.dead_letter}" if args.dead_letter else ""))
    for m in report.closed:
        print(f"  closed: {m.describe()}")
    for c in report.unfixed:  # still in the output: the exit status stays 1
        print(f"  not fixed: batch {c.entry} at byte {c.position}: {c.rule}: {c.message} ({c.detail})")
    if tail is not None:  # what was lost with the tail cannot be repaired: the status says so
        print(f"  {culprit_line(tail)}")
    return DAMAGED if report.result.culprit_count or cut else OK
