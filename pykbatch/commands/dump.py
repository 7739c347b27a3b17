"""``pykbatch dump``: log, index and state files printed as kafka-dump-log.sh prints them, or a
segment's records exported with their batch columns (``--to``)."""
from __future__ import annotations

import os
import sys

from pykbatch.config import ValidationConfig
from pykbatch.log.files import LOG
from pykbatch.progress import Progress

from pykbatch.commands.validate import validate_file
from pykbatch.commands.common import (
    add_strict, compacted_for,
    CANNOT_RUN, DAMAGED, OK, UsageError, culprit_line, folder_of, origin_of, output_path, read_properties, threads,
    topic_partition,
)


def add_parser(sub) -> None:
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
    d.add_argument("--jobs", type=threads, default=None, metavar="N",
                   help="with --to: threads decoding ahead of the writer (default: the cores this process may use)")
    d.add_argument("--validate", action="store_true", help="also print the validator's culprits for .log files")
    d.add_argument("--compacted", action="store_true",
                   help="the topic is compacted: offsets missing between segments are the cleaner's (and with "
                        "--validate, every record needs a key)")
    add_strict(d)
    d.add_argument("--no-progress", action="store_true", help="no progress line on a terminal")
    d.add_argument("--style", choices=("java", "scala"), default="java",
                   help="print as kafka-dump-log of Kafka 4.3+ (java, default) or of 4.2 and earlier (scala)")
    d.add_argument("--key-decoder", "--key-decoder-class", metavar="MODULE:FUNCTION", default=None,
                   help="a Python callable bytes -> str for keys, or 'confluent' (implies --print-data-log)")
    d.add_argument("--value-decoder", "--value-decoder-class", metavar="MODULE:FUNCTION", default=None,
                   help="a Python callable bytes -> str for values, or 'confluent': Confluent-framed Avro, "
                        "Protobuf or JSON Schema values as JSON, their schemas from --schema-registry; a value "
                        "that cannot be read prints its rule and byte and the exit status is 1")
    d.add_argument("--schema-registry", metavar="URL", default=None,
                   help="the schema registry for 'confluent' decoders (Confluent-compatible REST API)")
    d.add_argument("--schema-registry-config", metavar="FILE", default=None,
                   help="the registry's client properties (url, basic.auth.user.info, ssl.ca.location, ...), "
                        "key=value lines: secrets stay off the command line")
    from pykbatch.dump import STRUCTURED_DECODERS
    for name in STRUCTURED_DECODERS:  # with several, the first in Kafka's order wins, as in its tool
        d.add_argument(f"--{name}-decoder", dest=f"decoder_{name.replace('-', '_')}", action="store_true",
                       help=f"decode {name} records as kafka-dump-log does (implies --print-data-log)")
    d.set_defaults(run=_dump)


REGISTRY_DECODER = "confluent"  # --key-decoder / --value-decoder: the schema registry's framing


def _registry_parser(args):
    """The record parser for --key-decoder/--value-decoder confluent (None without them)."""
    keys, values = args.key_decoder == REGISTRY_DECODER, args.value_decoder == REGISTRY_DECODER
    if not (keys or values):
        if args.schema_registry or args.schema_registry_config:
            raise UsageError("--schema-registry is for --value-decoder confluent / --key-decoder confluent")
        return None
    from pykbatch.values import SchemaRegistry
    from pykbatch.values.records import RegistryParser
    props = read_properties(args.schema_registry_config) if args.schema_registry_config else {}
    if args.schema_registry:
        props["url"] = args.schema_registry
    if not props.get("url") and not props.get("schema.registry.url"):
        raise UsageError("--value-decoder confluent needs --schema-registry URL (or url= in --schema-registry-config)")
    try:
        return RegistryParser(SchemaRegistry.from_config(props), keys=keys, values=values,
                              on_culprit=args.verdict.found)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


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
    from pykbatch.dump import STRUCTURED_DECODERS, dump_files, dump_json, dump_kind, parser_for
    if args.to:
        files = [f for spec in args.files for f in spec.split(",") if f]
        output_path(args.to[1], "--to")
        return _export(files, *args.to, jobs=args.jobs, progress=not args.no_progress, verdict=args.verdict)
    files = _dump_inputs(args.files)
    if not files:
        raise UsageError(f"no files to dump in {', '.join(args.files)}")
    folders = {folder_of(f) for f in files}
    if len(folders) == 1:  # one partition's files: its topic's compaction, as the files beside it say
        args.compacted = compacted_for(args, folders.pop(), say=False)
    args.structured = next((n for n in STRUCTURED_DECODERS if getattr(args, f"decoder_{n.replace('-', '_')}")), None)
    decoders = {}
    registry_parser = _registry_parser(args)
    if args.key_decoder and args.key_decoder != REGISTRY_DECODER:
        decoders["key_decoder"] = _callable(args.key_decoder)
    if args.value_decoder and args.value_decoder != REGISTRY_DECODER:
        decoders["value_decoder"] = _callable(args.value_decoder)
    print_data = args.print_data_log or bool(decoders) or bool(args.structured) or registry_parser is not None
    if args.format == "text":
        problems = dump_files(files, deep=args.deep_iteration, print_data=print_data,
                              skip_metadata=args.skip_record_metadata, max_bytes=args.max_bytes,
                              verify_index_only=args.verify_index_only, index_sanity_check=args.index_sanity_check,
                              max_message_size=args.max_message_size, progress=not args.no_progress,
                              style=args.style, decoder=args.structured, parser=registry_parser,
                              on_problem=args.verdict.found, compacted=args.compacted, **decoders)
    else:
        parser = registry_parser or (parser_for(args.structured, **decoders) if decoders or args.structured else None)
        problems = dump_json(files, lines=args.format == "jsonl", deep=args.deep_iteration, print_data=print_data,
                             max_bytes=args.max_bytes, parser=parser, on_problem=args.verdict.found,
                             compacted=args.compacted)
    if registry_parser is not None and registry_parser.culprits:
        problems += len(registry_parser.culprits)
        print(f"{len(registry_parser.culprits)} key(s)/value(s) could not be read as their schemas say "
              f"(first at offset {registry_parser.offsets[0]}: {registry_parser.culprits[0].rule})", file=sys.stderr)
    kinds = {f: dump_kind(f) for f in files}
    if args.validate:
        for path in files:
            if kinds[path] == LOG:
                problems += validate_file(path, ValidationConfig(origin=origin_of(path), compacted=args.compacted),
                                          args)
    problems += _cut_segments(args, [f for f in files if kinds[f] == LOG])
    if None in kinds.values():
        return CANNOT_RUN  # each was named on stderr ("Ignoring unknown file"), as Kafka's tool does
    return DAMAGED if problems else OK


def _cut_segments(args, logs: list[str]) -> int:
    """What the partition shows of the logs dumped (pykbatch.log.truth): a closed segment cut
    short, offsets missing between segments (unless --compacted), and with --strict a last
    segment ending inside an entry.  Each named on stderr (the dump's own lines stay
    kafka-dump-log's); how many."""
    if args.max_bytes is not None or not logs:
        return 0
    from pykbatch.log.truth import partition_findings
    tp = topic_partition(None, folder_of(logs[0]))
    unread = 0
    if not args.validate:  # what the dump did not read (records, unless deep) still decides its status
        from pykbatch.log.segments import open_input
        for path in logs:
            with open_input(path) as seg:
                result = seg.validate(ValidationConfig(origin=origin_of(path), compacted=args.compacted,
                                                       topic_partition=tp))
            if result.culprit_count:
                unread += args.verdict.found(1)
                print(f"{path}: {result.culprit_count} culprit(s), the first {culprit_line(result.culprits[0])}; "
                      f"`pykbatch validate {path}` names each", file=sys.stderr)
    found = partition_findings(logs, args.compacted, tp, args.strict)
    for path, culprit in found:
        args.verdict.found()
        print(f"{path}: {culprit_line(culprit)}", file=sys.stderr)
    directories = [os.path.abspath(f) for spec in args.files for f in spec.split(",") if os.path.isdir(f)]
    missing = [problem for d in directories
               for problem in _partition_indexes([p for p in logs if os.path.dirname(os.path.abspath(p)) == d], tp)]
    for problem in missing:  # a partition directory given: each segment's indexes are part of it
        args.verdict.found()
        print(problem, file=sys.stderr)
    return len(found) + len(missing) + unread


def _partition_indexes(logs: list[str], tp: str) -> list[str]:
    """What a partition directory's indexes lack beside its logs: a segment's missing offset or
    time index, transaction indexes that disagree with the transactions the logs abort."""
    from pykbatch.log.audit import txn_index_findings
    from pykbatch.log.checks import missing_indexes
    from pykbatch.log.files import base_offset_of
    if not logs:
        return []
    logs = sorted(logs, key=lambda p: base_offset_of(os.path.basename(p)))
    return missing_indexes(logs) + txn_index_findings(logs, tp)


def _export(files, fmt: str, dest: str, jobs: int | None = None, progress: bool = True, verdict=None) -> int:
    """One .log file into a file, or a partition directory into a directory of files (one per segment)."""
    from pykbatch.log.export import FORMATS, export_partition, export_segment
    from pykbatch.log import Partition
    if fmt not in FORMATS:
        raise UsageError(f"--to takes a format ({' or '.join(FORMATS)}), then a file (a directory for a partition), "
                         f"not {fmt!r}")
    if len(files) == 1 and os.path.isdir(files[0]):
        logs = Partition(files[0]).segment_paths
        with Progress(len(logs), files[0], unit="segments", enabled=progress) as meter:
            done = export_partition(logs, dest, fmt, jobs=jobs, progress=meter.update)
        reports = [report for _, report in done]
        wrote = f"{sum(r.rows for r in reports)} records of {len(logs)} segment(s) of {files[0]} to {dest.rstrip('/')}/"
    else:
        from pykbatch.dump import dump_kind
        logs = [f for f in files if dump_kind(f) == LOG]
        if len(logs) != 1:
            raise UsageError("--to exports one .log file, or a partition directory")
        with Progress(os.path.getsize(logs[0]), logs[0], enabled=progress) as meter:
            reports = [export_segment(logs[0], dest, fmt, jobs=jobs, progress=meter.update)]
        wrote = f"{reports[0].rows} records of {logs[0]} to {dest}"
    if verdict is not None:
        verdict.found(not all(r.ok for r in reports))
    print(f"wrote {wrote} ({fmt})")
    for log, report in zip(logs, reports):
        where = f" of {log}" if len(logs) > 1 else ""
        for position, entry, problems, rows in report.damaged:
            what = f"left out batch {entry} at byte {position}{where}" if not rows else \
                f"batch {entry} at byte {position}{where}, {rows} record(s) exported"
            for exc in problems:
                print(f"{what}: {exc.line()}", file=sys.stderr)
        for span in report.lost:
            print(f"left out {span.size} unreadable byte(s) at byte {span.position}{where} (the framing was lost; "
                  f"resumed at byte {span.position + span.size}): {span.error.line()}", file=sys.stderr)
        for c in report.backwards:
            print(f"offsets go backwards at byte {c.position}{where} (exported; which batch is wrong is not known): "
                  f"{c.rule}: {c.message}", file=sys.stderr)
        if report.stopped is not None:
            print(f"the walk of {log} stopped {report.stopped.line()}; nothing after it was exported",
                  file=sys.stderr)
    damaged = sum(len(r.damaged) for r in reports)
    if damaged:
        print(f"{damaged} damaged batch(es) in {dest.rstrip('/')}: what could be read of them was exported",
              file=sys.stderr)
    return OK if all(r.ok for r in reports) else DAMAGED
