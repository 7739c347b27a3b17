"""``pykbatch tiered plan|export``: a remote store read as the broker serves it, from the shell.

    pykbatch tiered plan s3://bucket/tiered --metadata /kafka/logs/__remote_log_metadata-0 \\
        --storage-option client_kwargs.endpoint_url=http://minio:9000
    pykbatch tiered export /mnt/tiered --metadata meta/ --local-dir /kafka/logs \\
        --isolation-level read_committed --topic orders --to parquet orders.parquet
"""
from __future__ import annotations

import json
import sys
import warnings

from pykbatch.commands.common import DAMAGED, OK, UsageError
from pykbatch.kafka.isolation import ISOLATION_LEVELS, READ_UNCOMMITTED

# reports that mean data a consumer would get could not be read (exit status 1)
PROBLEMS = ("missing_object", "truncated_object", "damaged", "txn_index_missing")


def storage_options(pairs) -> dict:
    """``--storage-option KEY=VALUE`` texts as fsspec storage options (``layouts.storage_options``)."""
    from pykbatch.tiered.layouts import storage_options as nest
    items = []
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"a storage option is KEY=VALUE, not {pair!r}")
        items.append((key, value))
    return nest(items)


def add_parser(sub) -> None:
    t = sub.add_parser("tiered", help="read a tiered-storage remote store as the broker serves it")
    tsub = t.add_subparsers(dest="tiered_command", required=True)
    for name, run, help_ in (("plan", _plan, "per partition: what is read from where, and every report"),
                             ("export", _export, "every record a consumer would read, to Parquet or Arrow")):
        c = tsub.add_parser(name, help=help_)
        c.add_argument("store", metavar="STORE", help="the remote store's root: a path, file://, s3://bucket/prefix ...")
        c.add_argument("--metadata", action="append", default=[], metavar="PATH",
                       help="__remote_log_metadata segment files or partition directories (repeatable); without "
                            "them the store's listing is trusted, with a warning")
        c.add_argument("--local-dir", action="append", default=[], metavar="DIR",
                       help="a broker log directory: its segments continue the remote log (repeatable)")
        c.add_argument("--topic", action="append", default=None, help="only these topics (repeatable)")
        c.add_argument("--layout", default=None, help="the store's layout (default: detected)")
        c.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                       help="an fsspec option, e.g. client_kwargs.endpoint_url=http://127.0.0.1:9000")
        c.add_argument("--isolation-level", choices=ISOLATION_LEVELS, default=READ_UNCOMMITTED,
                       help="what a consumer at this level receives (read_committed: no aborted records, nothing at "
                            "or past the last stable offset)")
        c.add_argument("--json", action="store_true", help="plan: one JSON document")
        if name == "export":
            c.add_argument("--to", nargs=2, required=True, metavar=("FORMAT", "FILE"), help="parquet or arrow")
            c.add_argument("--start-offset", type=int, default=None, metavar="OFFSET",
                           help="the first offset exported (a consumer fetching from here)")
            c.add_argument("--end-offset", type=int, default=None, help="inclusive")
        c.set_defaults(run=run)


def _partitions(args):
    from pykbatch.tiered import TieredTopicStore, open_store
    try:
        store = open_store(args.store, args.layout, **storage_options(args.storage_option))
    except (ValueError, ImportError) as exc:  # no such layout, a bad option, no s3fs: the command line's
        raise UsageError(str(exc)) from None
    topic_store = TieredTopicStore(store, args.metadata)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parts = topic_store.partitions(args.local_dir, args.topic)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    for rec in topic_store.metadata_errors:
        print(f"warning: {rec.path}: metadata record at offset {rec.offset} not decoded: {rec.error}", file=sys.stderr)
    return topic_store, parts


def _plan(args) -> int:
    _, parts = _partitions(args)
    args.verdict.found(any(r.kind in PROBLEMS for part in parts for r in part.reports))
    doc = []
    for part in parts:
        iso = part.isolation(args.isolation_level)
        doc.append({"partition": part.name, "topic_id": str(part.partition).split(":")[0],
                    "last_stable_offset": iso.last_stable_offset,
                    "pieces": [{"start": p.start, "end": p.end, "source": p.source, "path": p.path} for p in part.pieces],
                    "reports": [r.__dict__ for r in part.reports]})
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        for part, d in zip(parts, doc):
            print(f"{part.name} ({d['topic_id']}): {len(part.pieces)} piece(s)"
                  + (f", last stable offset {d['last_stable_offset']}" if d["last_stable_offset"] is not None else ""))
            for p in part.pieces:
                print(f"  {p.start}-{'' if p.end is None else p.end} {p.source} {p.path}")
            for r in part.reports:
                print(f"  report: {r.line()}")
    return DAMAGED if any(r.kind in PROBLEMS for part in parts for r in part.reports) else OK


def _export(args) -> int:
    import pyarrow as pa

    from pykbatch.log.export import FORMATS
    from pykbatch.tiered.tables import partition_tables, schema
    fmt, dest = args.to
    if fmt not in FORMATS:
            raise UsageError(f"--to FORMAT is one of {', '.join(FORMATS)}")
    _, parts = _partitions(args)
    target = schema()
    if fmt == "parquet":
        import pyarrow.parquet as pq
        writer = pq.ParquetWriter(dest, target)
    else:
        writer = pa.ipc.new_file(dest, target)
    rows = 0
    try:
        for part in parts:
            for table in partition_tables(part, args.isolation_level, args.start_offset, args.end_offset):
                writer.write_table(table.cast(target))
                rows += table.num_rows
    finally:
        writer.close()
    problems = args.verdict.found([r for part in parts for r in part.reports if r.kind in PROBLEMS])
    for part in parts:
        for r in part.reports:
            print(f"report: {r.line()}", file=sys.stderr)
    print(f"wrote {rows} record(s) of {len(parts)} partition(s) to {dest} ({args.isolation_level})")
    return DAMAGED if problems else OK
