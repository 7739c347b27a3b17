"""``pykbatch copy``: copy a live topic whose consumers are stuck on damage to a new topic, exactly
once across restarts (``pykbatch.live.copy``): every readable record with its key, value, headers,
timestamp and partition; every unreadable range named and dead-lettered; an offset map for the
consumers that move over (``--move-group``).  Killed, it resumes where its last transaction
ended.  Exit status 1 when any run of the copy skipped a range or dead-lettered a record B refused:
damage is never reported as nothing wrong."""
from __future__ import annotations

import json
import signal
import sys

from pykbatch.commands.common import (
    CANNOT_RUN,
    UsageError,
    client_properties,
    key_values,
)


def add_parser(sub) -> None:
    c = sub.add_parser("copy", help="copy a live topic to another, exactly once, past every range that cannot be "
                                    "read (named and dead-lettered), with an offset map for its consumers")
    c.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="the cluster of both topics")
    c.add_argument("--from-topic", required=True, metavar="A", help="the topic to copy")
    c.add_argument("--to-topic", required=True, metavar="B",
                   help="where its records go (created with A's partition count when missing)")
    c.add_argument("--name", metavar="NAME", help="the copy's transactional.id and consumer group, which a restart "
                                                  "resumes (default pykbatch-copy-A-B)")
    c.add_argument("--follow", action="store_true", help="keep copying what A receives until interrupted (default: "
                                                         "stop at A's end as the copy starts)")
    c.add_argument("--isolation-level", choices=("read_committed", "read_uncommitted"), default="read_committed",
                   help="which records of A are copied (default read_committed: aborted transactions are not)")
    c.add_argument("--offset-map-topic", metavar="TOPIC", help="where the offset map goes (default B-offset-map)")
    c.add_argument("--dead-letter-topic", metavar="TOPIC",
                   help="where each skipped range (and each record B refuses) goes (default A-dead-letters)")
    c.add_argument("--commit-interval-ms", type=int, default=1000, metavar="MS",
                   help="a transaction ends after this long (default 1000)")
    c.add_argument("--max-transaction-records", type=int, default=50_000, metavar="N",
                   help="or after this many records (default 50000)")
    c.add_argument("--errors-tolerance", choices=("none", "all"), default="none",
                   help="a record B refuses: none stops the copy (default), all dead-letters it")
    c.add_argument("--move-group", action="append", default=[], metavar="GROUP",
                   help="after the copy: commit GROUP's offsets of A, translated by the offset map, as its offsets "
                        "of B (stop its consumers first); repeat for more")
    c.add_argument("--command-config", dest="config_file", metavar="FILE",
                   help="client properties for both sides, one key=value a line (security settings)")
    c.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE",
                   help="a property of the reader of A (fetch sizes, ...)")
    c.add_argument("--producer-property", action="append", default=[], metavar="KEY=VALUE",
                   help="a property of the writer of B (compression.type, linger.ms, transaction.timeout.ms, ...)")
    c.add_argument("--quiet", action="store_true", help="no line on standard error per transaction committed")
    c.add_argument("--json", action="store_true", help="the report as one JSON document")
    c.set_defaults(run=_copy)


class _Interrupted:
    """SIGINT / SIGTERM: the copy ends after the transaction in hand (a second signal: at once)."""

    def __init__(self) -> None:
        self.asked = False

    def __call__(self, signum, frame) -> None:
        if self.asked:
            raise KeyboardInterrupt
        self.asked = True
        print("pykbatch copy: stopping after this transaction (again to stop at once)", file=sys.stderr)

    def __bool__(self) -> bool:
        return self.asked


def _copy(args) -> int:
    from pykbatch.live import ClusterError, FatalProducerError, SettingsError
    from pykbatch.live.copy import copy_topic, move_group
    if args.commit_interval_ms <= 0:
        raise UsageError(f"--commit-interval-ms takes a positive number, not {args.commit_interval_ms}")
    if args.max_transaction_records <= 0:
        raise UsageError(f"--max-transaction-records takes a positive number, not {args.max_transaction_records}")
    if args.follow and args.move_group:
        raise UsageError("--move-group moves a group once the copy is done: not with --follow")
    props = client_properties(args.config_file, [], args.bootstrap_server, "--command-config")
    consumer = key_values(args.consumer_property, "--consumer-property")
    producer = key_values(args.producer_property, "--producer-property")
    stop = _Interrupted()
    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}

    def committed(report) -> None:
        if args.quiet:
            return
        at = ", ".join(f"{p}:{c.position}" for p, c in report.partitions.items())
        copied = sum(c.copied_now for c in report.partitions.values())
        print(f"pykbatch copy: transaction {report.transactions} committed: {copied} records copied by this run, "
              f"{args.from_topic} at {at}", file=sys.stderr, flush=True)
        args.verdict.found(not report.ok)  # known now, before any later failure or a closed pipe

    try:
        report = copy_topic(props, args.from_topic, args.to_topic, name=args.name, follow=args.follow,
                            isolation_level=args.isolation_level, map_topic=args.offset_map_topic,
                            dead_letter_topic=args.dead_letter_topic, commit_interval_ms=args.commit_interval_ms,
                            max_transaction_records=args.max_transaction_records,
                            errors_tolerance=args.errors_tolerance, consumer=consumer, producer=producer,
                            on_commit=committed, stop=lambda: bool(stop))
        args.verdict.found(not report.ok)
        moves = {g: move_group({**props, **consumer}, g, args.from_topic, args.to_topic, name=args.name,
                               map_topic=args.offset_map_topic) for g in args.move_group}
    except (ClusterError, SettingsError, FatalProducerError, ValueError, RuntimeError) as exc:
        # RuntimeError: a producer a newer copy under the name fenced, named in the message
        print(f"pykbatch copy: error: {exc}", file=sys.stderr)
        return args.verdict.end(CANNOT_RUN)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if args.json:
        print(json.dumps({**report.as_dict(), "moved_groups": {g: {str(p): {"from": a, "to": b} for p, (a, b)
                                                                     in m.items()} for g, m in moves.items()}}))
    else:
        for line in report.lines():
            print(line)
        for g, m in moves.items():
            print(f"group {g} moved to {args.to_topic}: " + ", ".join(f"{p}: {a} -> {b}" for p, (a, b) in m.items()))
    return args.verdict.status
