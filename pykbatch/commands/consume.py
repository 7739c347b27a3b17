"""``pykbatch consume``: read a topic of a live cluster through the live reader and print its
records -- as kafka-console-consumer does (``--property print.key=true`` ...), in kcat's ``-f``
format, or as JSON lines -- or write them to a Parquet, Arrow or JSON-lines file; every range that
cannot be read is named (its rule and Kafka's code), each partition's accounting printed, and the
unreadable bytes can go to a dead-letter file.  With ``--group G`` it reads as a member of the
consumer group G (``pykbatch.live.membership``), from the group's commits, until --max-messages
or SIGINT / SIGTERM, committing as it goes.  Exit status 1 when any range was skipped: damage is
never reported as nothing wrong."""
from __future__ import annotations

import json
import signal
import sys

from pykbatch.commands.common import (
    CANNOT_RUN,
    UsageError,
    client_properties,
    key_values,
    output_path,
)

OUTPUTS = (".parquet", ".arrow", ".jsonl")
STDOUT = "-"


def add_parser(sub) -> None:
    c = sub.add_parser("consume", help="read a topic of a live cluster: print its records, name every range that "
                                       "cannot be read")
    c.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="the cluster to read")
    c.add_argument("--topic", required=True, action="append", metavar="TOPIC",
                   help="a topic to read (every partition unless --partition); repeat for more")
    c.add_argument("--partition", type=int, action="append", metavar="N",
                   help="only these partitions (of a single --topic); repeat for more")
    c.add_argument("--group", metavar="GROUP",
                   help="read as a member of consumer group GROUP (KIP-848; group.protocol=classic as a "
                        "--consumer-property): the partitions the coordinator "
                        "assigns, from the group's commits (--from earliest|latest where it has none; default "
                        "latest, as kafka-console-consumer), committing as it goes, until --max-messages or a "
                        "signal")
    c.add_argument("--from", dest="start", default=None, metavar="earliest|latest|OFFSET",
                   help="where to start in every partition (default earliest)")
    c.add_argument("--from-beginning", dest="start", action="store_const", const="earliest",
                   help="as kafka-console-consumer: --from earliest")
    c.add_argument("--to", dest="end", default=None, metavar="latest|OFFSET",
                   help="where to stop (exclusive; default latest: the end when the command started)")
    c.add_argument("--max-messages", type=int, default=None, metavar="N", help="stop after N records")
    c.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"), default=None)
    c.add_argument("--consumer.config", dest="config_file", metavar="FILE",
                   help="client properties, one key=value a line (security settings: keeps secrets off the "
                        "command line; the Java consumer's group.id, isolation.level, fetch sizes too)")
    c.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE",
                   help="one client property (security.protocol, sasl.mechanism, ssl.ca.location, group.id, ...)")
    c.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="how records print, as kafka-console-consumer's: print.key, print.timestamp, print.offset, "
                        "print.partition, print.headers, print.value, key.separator, line.separator, null.literal")
    c.add_argument("--format", dest="fmt", metavar="FMT", default=None,
                   help="print each record as kcat -f does: %%t topic, %%p partition, %%o offset, %%k key, %%s value, "
                        "%%h headers, %%T timestamp, %%K/%%S lengths, \\n")
    c.add_argument("--jsonl", action="store_true", help="print each record as a JSON object, one a line")
    c.add_argument("--out", metavar="FILE", help="write the records to FILE (.parquet, .arrow or .jsonl; - for "
                                                 "standard output) instead of printing them; the report then goes "
                                                 "to standard output")
    c.add_argument("--dead-letters", metavar="FILE",
                   help="append each skipped range, its bytes and its error context to FILE (JSON lines)")
    c.add_argument("--json", action="store_true", help="the report as one JSON document: per-partition counts and "
                                                       "every skip")
    c.set_defaults(run=_consume)


def _offsets(spec: str, what: str):
    if spec in ("earliest", "latest"):
        return spec
    try:
        return int(spec)
    except ValueError:
        raise UsageError(f"{what} takes earliest, latest or an offset, not {spec!r}") from None


def _printer(args):
    """The record formatter for standard output (None when records go to a file)."""
    from pykbatch.commands import record_text
    if args.out not in (None, STDOUT):
        if args.fmt or args.jsonl or args.property:
            raise UsageError("--format, --jsonl and --property print records: with --out FILE they are written there")
        return None
    if sum(map(bool, (args.fmt, args.jsonl, args.property))) > 1:
        raise UsageError("choose one of --format, --jsonl and --property")
    if args.fmt is not None:
        return record_text.kcat(args.fmt)
    if args.jsonl:
        return record_text.json_line
    return record_text.console(key_values(args.property, "--property"))


def _consume(args) -> int:
    from pykbatch.live import ClusterError, JsonLinesDeadLetters, Reader, SettingsError
    from pykbatch.live.settings import consumer_settings, outside_group
    from pykbatch.policy import ErrorPolicy
    _check_out_and_limit(args)
    if args.group is not None:
        return _consume_in_group(args)
    args.start = args.start or "earliest"
    args.end = args.end or "latest"
    if args.partition and len(args.topic) != 1:
        raise UsageError("--partition goes with a single --topic")
    if args.start == "latest" and args.end == "latest":
        raise UsageError("--from latest --to latest reads nothing")
    start, end = _offsets(args.start, "--from"), _offsets(args.end, "--to")
    if isinstance(start, int) and isinstance(end, int) and start > end:
        raise UsageError(f"--from {start} is past --to {end}")
    assign = {args.topic[0]: args.partition} if args.partition else None
    printer = _printer(args)
    report = sys.stderr if printer is not None else sys.stdout  # records own standard output when printed

    def per_partition(value, tps):
        if isinstance(value, str):
            return value
        spec: dict = {}
        for tp in tps:
            spec.setdefault(tp.topic, {})[str(tp.partition)] = value
        return spec

    try:
        props, java = consumer_settings(client_properties(args.config_file, args.consumer_property,
                                                          args.bootstrap_server, "--consumer-property"))
        from pykbatch.live import Cluster
        from pykbatch.live.offsets import assigned
        cluster = Cluster(props)
        cluster.connect()
        tps = assigned(cluster, assign, None if assign else ",".join(args.topic))
        sink = JsonLinesDeadLetters(args.dead_letters) if args.dead_letters else None
        java = outside_group(java)
        java.pop("auto_offset_reset", None)  # --from says where to start
        if args.isolation_level:  # the flag wins over isolation.level
            java["isolation_level"] = args.isolation_level
        reader = Reader(cluster, assign={t: [tp.partition for tp in tps if tp.topic == t] for t in
                                         dict.fromkeys(tp.topic for tp in tps)},
                        starting_offsets=per_partition(start, tps), ending_offsets=per_partition(end, tps),
                        fail_on_data_loss=False, policy=ErrorPolicy(tolerance="all"), dead_letters=sink, **java)
        first = reader.positions()
        rows = 0
        try:
            rows = _records_out(args, reader, printer)
        finally:
            cluster.close()
    except (ClusterError, SettingsError) as exc:
        print(f"pykbatch consume: error: {exc}", file=sys.stderr)
        return CANNOT_RUN
    args.verdict.found(reader.skips)
    _report(args, tps, first, reader, rows, report)
    return args.verdict.status


def _consume_in_group(args) -> int:
    """--group: a member's records until --max-messages or SIGINT / SIGTERM; the report names every
    range skipped (those another member reported before: "skipped again")."""
    from pykbatch.live import ClusterError, JsonLinesDeadLetters, Reader, SettingsError
    from pykbatch.policy import ErrorPolicy
    if args.partition:
        raise UsageError("--partition: a group's member reads what the coordinator assigns (no --group to choose)")
    if args.end is not None:
        raise UsageError("--to: a group's member reads on; stop it with --max-messages or a signal")
    if args.start not in (None, "earliest", "latest"):
        raise UsageError("--from with --group: earliest or latest (where a partition the group never committed "
                         "starts); a group starts at its commits")
    printer = _printer(args)
    report = sys.stderr if printer is not None else sys.stdout
    props = client_properties(args.config_file, args.consumer_property, args.bootstrap_server, "--consumer-property")
    props["group.id"] = args.group
    if args.start is not None or "auto.offset.reset" not in props:
        props["auto.offset.reset"] = args.start or "latest"
    if args.isolation_level:
        props["isolation.level"] = args.isolation_level
    stop = []
    previous = {s: signal.signal(s, lambda *_: stop.append(1)) for s in (signal.SIGINT, signal.SIGTERM)}
    rows, reader = 0, None
    try:
        sink = JsonLinesDeadLetters(args.dead_letters) if args.dead_letters else None
        reader = Reader(props, subscribe=",".join(args.topic), join_group=True, policy=ErrorPolicy(tolerance="all"),
                        dead_letters=sink)
        try:
            rows = _records_out(args, reader, printer, stop=stop)
        finally:
            reader.close()  # the last commit, the group left
    except (ClusterError, SettingsError) as exc:
        print(f"pykbatch consume: error: {exc}", file=sys.stderr)
        return args.verdict.end(CANNOT_RUN)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    args.verdict.found(reader.skips)
    if args.json:
        print(json.dumps({"group": args.group, "member": reader.member and reader.member.member_id, "records": rows,
                          "ok": not reader.skips, "skips": [s.as_dict() for s in reader.skips],
                          "metrics": reader.metrics.as_dict()}), file=report)
    else:
        print(f"{rows} records read in group {args.group}, {_status(reader.skips)}", file=report)
        for s in reader.skips:
            print(f"  {s.line()}", file=report)
    return args.verdict.status


def _check_out_and_limit(args) -> None:
    if args.out and args.out != STDOUT and not args.out.endswith(OUTPUTS):
        raise UsageError(f"--out writes {', '.join(OUTPUTS)} files (or - for standard output), not {args.out}")
    if args.out and args.out != STDOUT:
        output_path(args.out, "--out")
    if args.max_messages is not None and args.max_messages < 1:
        raise UsageError(f"--max-messages takes a number, at least 1, not {args.max_messages}")


def _status(skips) -> str:
    return "ok" if not skips else f"{len(skips)} range(s) skipped ({sum(s.count for s in skips)} offsets)"


def _records_out(args, reader, printer, stop=()) -> int:
    """Every record read, printed (``printer``) or written to ``--out``; at most --max-messages
    (and, ``stop`` once true, no more polls)."""
    from pykbatch.live.reader import records_of
    left = args.max_messages
    writer = None
    out = sys.stdout.buffer if printer is not None else None
    rows = 0
    try:
        for poll in reader.polls():
            args.verdict.found(poll.skips)  # before the records after them: a reader leaving keeps it
            table = poll.table if left is None else poll.table.slice(0, left)
            if reader.member is not None and table.num_rows < poll.table.num_rows:
                _rewind(reader, poll.table.slice(table.num_rows))  # the group commits only what was printed
            if table.num_rows:
                if printer is not None:
                    sys.stdout.flush()
                    out.write(b"".join(printer(r) for r in records_of(table)))
                elif args.out:
                    writer = writer or _writer(args.out, table.schema)
                    writer.write_table(table)
            rows += table.num_rows
            if left is not None:
                left -= table.num_rows
                if left <= 0:
                    break
            if stop:
                break
    finally:
        if writer is not None:
            writer.close()
    if args.out and args.out != STDOUT and writer is None:  # nothing readable: still a file of the right shape
        from pykbatch.live import SCHEMA
        _writer(args.out, SCHEMA).close()
    if out is not None:
        out.flush()
    return rows


def _rewind(reader, unread) -> None:
    """Each partition of ``unread`` (records a poll returned past --max-messages) back to its first."""
    import pyarrow.compute as pc

    from pykbatch.live import TopicPartition
    for topic, partition in {(t, p) for t, p in zip(unread.column("topic").to_pylist(),
                                                     unread.column("partition").to_pylist())}:
        mask = pc.and_(pc.equal(unread.column("topic"), topic), pc.equal(unread.column("partition"), partition))
        reader.seek(TopicPartition(topic, partition), pc.min(unread.filter(mask).column("offset")).as_py())


def _writer(path: str, schema):
    if path.endswith(".jsonl"):
        return _JsonLines(path)
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq
        return pq.ParquetWriter(path, schema)
    import pyarrow as pa
    return pa.ipc.new_file(path, schema)


class _JsonLines:
    """--out FILE.jsonl: each record a JSON object (``record_text.json_line``)."""

    def __init__(self, path: str):
        self.file = open(path, "wb")

    def write_table(self, table) -> None:
        from pykbatch.commands.record_text import json_line
        from pykbatch.live.reader import records_of
        self.file.write(b"".join(json_line(r) for r in records_of(table)))

    def close(self) -> None:
        self.file.close()


def _report(args, tps, first: dict, reader, rows: int, out=None) -> None:
    """The accounting and every skip: to standard output, or standard error when records own it."""
    out = out or sys.stdout
    last = reader.positions()
    ledgers = reader.accounting()
    if args.json:
        print(json.dumps({"partitions": [{"topic": tp.topic, "partition": tp.partition, "from": first[tp],
                                          "to": last[tp], "accounting": ledgers[tp].as_dict()} for tp in tps],
                          "records": rows, "ok": not reader.skips, "skips": [s.as_dict() for s in reader.skips],
                          "metrics": reader.metrics.as_dict()}), file=out)
        return
    status = _status(reader.skips)
    for tp in tps:  # every offset read over: delivered, skipped with a name, or explained
        print(ledgers[tp].line(), file=out)
    print(f"{rows} records read, {status}", file=out)
    for s in reader.skips:
        print(f"  {s.line()}", file=out)
