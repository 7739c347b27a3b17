"""``pykbatch consume``: read a topic of a live cluster through the live reader, print every range
that cannot be read (with its rule and Kafka's code), optionally write the readable records to a
Parquet or Arrow file and the unreadable bytes to a dead-letter file.  Exit status 1 when any
range was skipped: damage is never reported as nothing wrong."""
from __future__ import annotations

import json
import sys

from pykbatch.commands.common import CANNOT_RUN, DAMAGED, OK, UsageError, client_properties

OUTPUTS = (".parquet", ".arrow")


def add_parser(sub) -> None:
    c = sub.add_parser("consume", help="read a topic of a live cluster, print every range that cannot be read")
    c.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="the cluster to read")
    c.add_argument("--topic", required=True, action="append", metavar="TOPIC",
                   help="a topic to read (every partition unless --partition); repeat for more")
    c.add_argument("--partition", type=int, action="append", metavar="N",
                   help="only these partitions (of a single --topic); repeat for more")
    c.add_argument("--from", dest="start", default="earliest", metavar="earliest|latest|OFFSET",
                   help="where to start in every partition (default earliest)")
    c.add_argument("--to", dest="end", default="latest", metavar="latest|OFFSET",
                   help="where to stop (exclusive; default latest: the end when the command started)")
    c.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"), default="read_uncommitted")
    c.add_argument("--consumer.config", dest="config_file", metavar="FILE",
                   help="client properties, one key=value a line (security settings: keeps secrets off the "
                        "command line)")
    c.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE",
                   help="one client property (security.protocol, sasl.mechanism, ssl.ca.location, ...)")
    c.add_argument("--out", metavar="FILE", help="write the readable records to FILE (.parquet or .arrow)")
    c.add_argument("--dead-letters", metavar="FILE",
                   help="append each skipped range, its bytes and its error context to FILE (JSON lines)")
    c.add_argument("--json", action="store_true", help="one JSON document: per-partition counts and every skip")
    c.set_defaults(run=_consume)


def _offsets(spec: str, what: str):
    if spec in ("earliest", "latest"):
        return spec
    try:
        return int(spec)
    except ValueError:
        raise UsageError(f"{what} takes earliest, latest or an offset, not {spec!r}") from None


def _consume(args) -> int:
    from pykbatch.live import ClusterError, JsonLinesDeadLetters, Reader, SettingsError
    from pykbatch.policy import ErrorPolicy
    if args.out and not args.out.endswith(OUTPUTS):
        raise UsageError(f"--out writes {' or '.join(OUTPUTS)} files, not {args.out}")
    if args.partition and len(args.topic) != 1:
        raise UsageError("--partition goes with a single --topic")
    if args.start == "latest" and args.end == "latest":
        raise UsageError("--from latest --to latest reads nothing")
    start, end = _offsets(args.start, "--from"), _offsets(args.end, "--to")
    if isinstance(start, int) and isinstance(end, int) and start > end:
        raise UsageError(f"--from {start} is past --to {end}")
    assign = {args.topic[0]: args.partition} if args.partition else None

    def per_partition(value, tps):
        if isinstance(value, str):
            return value
        spec: dict = {}
        for tp in tps:
            spec.setdefault(tp.topic, {})[str(tp.partition)] = value
        return spec

    try:
        props = client_properties(args.config_file, args.consumer_property, args.bootstrap_server,
                                  "--consumer-property")
        from pykbatch.live import Cluster
        from pykbatch.live.offsets import assigned
        cluster = Cluster(props)
        cluster.connect()
        tps = assigned(cluster, assign, None if assign else ",".join(args.topic))
        sink = JsonLinesDeadLetters(args.dead_letters) if args.dead_letters else None
        reader = Reader(cluster, assign={t: [tp.partition for tp in tps if tp.topic == t] for t in
                                         dict.fromkeys(tp.topic for tp in tps)},
                        starting_offsets=per_partition(start, tps), ending_offsets=per_partition(end, tps),
                        isolation_level=args.isolation_level, fail_on_data_loss=False,
                        policy=ErrorPolicy(tolerance="all"), dead_letters=sink)
        first = reader.positions()
        writer, rows = None, 0
        try:
            for poll in reader.polls():
                if poll.table.num_rows and args.out:
                    writer = writer or _writer(args.out, poll.table.schema)
                    writer.write_table(poll.table)
                rows += poll.table.num_rows
        finally:
            if writer is not None:
                writer.close()
            cluster.close()
    except (ClusterError, SettingsError) as exc:
        print(f"pykbatch consume: error: {exc}", file=sys.stderr)
        return CANNOT_RUN
    if args.out and writer is None:  # nothing readable: still a file of the right shape
        from pykbatch.live import SCHEMA
        _writer(args.out, SCHEMA).close()
    args.verdict.found(reader.skips)
    _report(args, tps, first, reader, rows)
    return args.verdict.status


def _writer(path: str, schema):
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq
        return pq.ParquetWriter(path, schema)
    import pyarrow as pa
    return pa.ipc.new_file(path, schema)


def _report(args, tps, first: dict, reader, rows: int) -> None:
    last = reader.positions()
    ledgers = reader.accounting()
    if args.json:
        print(json.dumps({"partitions": [{"topic": tp.topic, "partition": tp.partition, "from": first[tp],
                                          "to": last[tp], "accounting": ledgers[tp].as_dict()} for tp in tps],
                          "records": rows, "ok": not reader.skips, "skips": [s.as_dict() for s in reader.skips],
                          "metrics": reader.metrics.as_dict()}))
        return
    skipped = sum(s.count for s in reader.skips)
    status = "ok" if not reader.skips else f"{len(reader.skips)} range(s) skipped ({skipped} offsets)"
    for tp in tps:  # every offset read over: delivered, skipped with a name, or explained
        print(ledgers[tp].line())
    print(f"{rows} records read, {status}")
    for s in reader.skips:
        print(f"  {s.line()}")
