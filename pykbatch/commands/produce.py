"""``pykbatch produce``: send records to a topic of a live cluster through pykbatch's producer and
print what became of every one: delivered, or -- for each record the broker or the pre-flight
refused -- dropped, dead-lettered or failed, with its rule, Kafka's code and the message.

Records come from a Parquet or Arrow file (Spark's Kafka sink columns: value, and optionally key,
headers, timestamp, partition, topic), a JSON-lines file (one object a line: value, key, headers,
timestamp, partition as text), or lines of text (a file or standard input: each line a value, or
``key<TAB>value`` with ``--parse-key``).  Exit status 0 when every record was delivered, 1 when
any was not (never 'ok' then), 2 when the command could not run."""
from __future__ import annotations

import json
import sys

from pykbatch.commands.common import CANNOT_RUN, UsageError, client_properties, progress_enabled
from pykbatch.progress import Progress

TABLES = (".parquet", ".arrow")
PROGRESS_FROM = 10_000  # records: a shorter produce ends before a progress line would help


def add_parser(sub) -> None:
    c = sub.add_parser("produce", help="send records to a topic of a live cluster; print every record not delivered")
    c.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="the cluster to write to")
    c.add_argument("--topic", metavar="TOPIC", help="the topic (else each record's topic column)")
    c.add_argument("--input", default="-", metavar="FILE",
                   help="records: .parquet, .arrow, .jsonl, or text lines (default: standard input)")
    c.add_argument("--parse-key", action="store_true", help="text lines are KEY<TAB>VALUE")
    c.add_argument("--key-separator", default="\t", metavar="SEP", help="with --parse-key (default: a tab)")
    c.add_argument("--errors-tolerance", choices=("none", "all"), default="none",
                   help="none: a refused record fails the command (default); all: it is dropped or dead-lettered")
    c.add_argument("--dead-letter-topic", metavar="TOPIC",
                   help="write each refused record there, with Connect's error headers (implies --errors-tolerance all)")
    c.add_argument("--compression", default="none", metavar="CODEC", help="none, gzip, snappy, lz4 or zstd")
    c.add_argument("--no-preflight", action="store_true",
                   help="do not check records against the topic's configuration first (the broker still does)")
    c.add_argument("--producer.config", dest="config_file", metavar="FILE",
                   help="client properties, one key=value a line (security settings: keeps secrets off the "
                        "command line)")
    c.add_argument("--producer-property", action="append", default=[], metavar="KEY=VALUE",
                   help="one producer or client property (acks, linger.ms, security.protocol, ...)")
    c.add_argument("--json", action="store_true", help="one JSON document: counts, metrics and every record not "
                                                       "delivered")
    c.add_argument("--no-progress", action="store_true", help="no progress line on a terminal")
    c.set_defaults(run=_produce)


def _table(args):
    """The input as an Arrow table with Spark's Kafka sink columns."""
    import pyarrow as pa
    path = args.input
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq
        return pq.read_table(path)
    if path.endswith(".arrow"):
        with pa.memory_map(path) as source:
            return pa.ipc.open_file(source).read_all()
    stream = sys.stdin.buffer if path == "-" else open(path, "rb")
    try:
        lines = [line.rstrip(b"\r\n") for line in stream]
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    if path.endswith(".jsonl"):
        return _json_lines(lines)
    keys, values = [], []
    sep = args.key_separator.encode()
    for number, line in enumerate(lines, 1):
        if args.parse_key:
            key, found, value = line.partition(sep)
            if not found:
                raise UsageError(f"line {number} has no key separator {args.key_separator!r} (--parse-key)")
            keys.append(key)
            values.append(value)
        else:
            values.append(line)
    columns = {"value": pa.array(values, pa.binary())}
    if args.parse_key:
        columns["key"] = pa.array(keys, pa.binary())
    return pa.table(columns)


def _json_lines(lines: list[bytes]):
    import pyarrow as pa
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"line {number} is not JSON: {exc}") from None
        if not isinstance(doc, dict) or "value" not in doc:
            raise UsageError(f"line {number}: a JSON object with at least a \"value\" field, not {line[:60]!r}")
        rows.append(doc)

    def blob(x, encoding=None):
        if x is None:
            return None
        if encoding == "base64":  # as pykbatch's JSON outputs write bytes that are not UTF-8
            import base64
            return base64.b64decode(x)
        return (x if isinstance(x, str) else json.dumps(x)).encode()
    from pykbatch.columns import HEADER
    header_type = pa.list_(HEADER)
    return pa.table({
        "key": pa.array([blob(r.get("key"), r.get("key_encoding")) for r in rows], pa.binary()),
        "value": pa.array([blob(r.get("value"), r.get("value_encoding")) for r in rows], pa.binary()),
        "headers": pa.array([[{"key": k, "value": blob(v, enc)} for k, v, enc in _headers(r.get("headers"), n, blob)]
                             for n, r in enumerate(rows, 1)], header_type),
        "timestamp": pa.array([r.get("timestamp") for r in rows], pa.int64()),
        "partition": pa.array([r.get("partition") for r in rows], pa.int32())})


def _headers(headers, line: int, blob) -> list[tuple]:
    """A JSON line's headers as Kafka has them, ordered and repeatable: ``[["k", "v"], ...]``,
    ``[{"key": "k", "value": "v"}, ...]`` (what ``consume --jsonl`` and ``dump --format jsonl``
    write, with ``value_encoding``), or an object ``{"k": "v"}``."""
    if headers is None:
        return []
    if isinstance(headers, dict):
        return [(k, v, None) for k, v in headers.items()]
    out = []
    if isinstance(headers, list):
        for h in headers:
            if isinstance(h, list) and len(h) == 2 and isinstance(h[0], str):
                out.append((h[0], h[1], None))
            elif isinstance(h, dict) and isinstance(h.get("key"), str):
                out.append((h["key"], h.get("value"), h.get("value_encoding")))
            else:
                break
        else:
            return out
    raise UsageError(f"line {line}: headers are [[\"key\", \"value\"], ...] (ordered, a key may repeat), "
                     f"[{{\"key\": ..., \"value\": ...}}, ...] or {{\"key\": \"value\"}}, not {json.dumps(headers)[:80]}")


def _produce(args) -> int:
    from pykbatch.live import ClusterError, ProduceFailedError, Producer, SettingsError
    if args.input != "-" and args.input.endswith(TABLES + (".jsonl",)) and args.parse_key:
        raise UsageError("--parse-key reads text lines, not a table or JSON lines")
    try:
        table = _table(args)
    except OSError as exc:
        print(f"pykbatch produce: error: cannot read {args.input}: {exc.strerror or exc}", file=sys.stderr)
        return CANNOT_RUN
    except ValueError as exc:  # an Arrow or Parquet file that is not one
        print(f"pykbatch produce: error: {args.input} is not a readable table: {exc}", file=sys.stderr)
        return CANNOT_RUN
    if "value" not in table.column_names:
        raise UsageError(f"{args.input} has no 'value' column (Spark's Kafka sink columns: key, value, headers, "
                         "timestamp, partition, topic)")
    if args.topic is None and "topic" not in table.column_names:
        raise UsageError("give --topic (the input has no 'topic' column)")
    props = client_properties(args.config_file, args.producer_property, args.bootstrap_server, "--producer-property")
    props.setdefault("errors.tolerance", "all" if args.dead_letter_topic else args.errors_tolerance)
    props.setdefault("compression.type", args.compression)
    props["preflight"] = not args.no_preflight
    if args.dead_letter_topic:
        props["errors.deadletterqueue.topic.name"] = args.dead_letter_topic
    try:
        with Producer(props) as producer:
            try:
                with Progress(table.num_rows, "produce", unit="records",
                              enabled=progress_enabled(args) and table.num_rows >= PROGRESS_FROM) as meter:
                    report = producer.produce_arrow(table, topic=args.topic, progress=meter.update)
            except ProduceFailedError as exc:
                report = exc.report
            metrics = producer.metrics_dict()
    except (ClusterError, SettingsError, ValueError, TypeError) as exc:
        print(f"pykbatch produce: error: {exc}", file=sys.stderr)
        return CANNOT_RUN
    args.verdict.found(report.delivered_count != report.records)
    _print(args, report, metrics)
    return args.verdict.status


def _print(args, report, metrics: dict) -> None:
    culprits = sorted(report.culprits, key=lambda c: c.row)
    if args.json:
        print(json.dumps({"records": report.records, **report.counts, "ok": report.delivered_count == report.records,
                          "culprits": [c.as_dict() for c in culprits], "metrics": metrics}))
        return
    status = "" if report.delivered_count == report.records else ", NOT all delivered"
    print(f"{report.summary()}{status}")
    for c in culprits:
        rule = f" [{c.error.rule}]" if c.error.rule else ""
        print(f"  record {c.row}: {c.outcome} -- {c.error.name} ({c.error.code}){rule} "
              f"{c.topic}-{c.partition}: {c.error.message}")
