"""``kafka-dump-log.sh``-compatible output for log files (Kafka's DumpLogSegments)."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Callable, TextIO

from pykbatch.kafka.control import KRAFT_MESSAGES, kraft_control_json, parse_control
from pykbatch.errors import KafkaDataError
from pykbatch.kafka.javautf8 import java_utf8
from pykbatch.progress import Progress
from pykbatch.log import (
    INDEX_TYPES, LOG, CorruptIndexError, OffsetIndex, ProducerSnapshot, Segment, TimeIndex, TxnIndex, sibling,
    suffix_of, topic_partition_of,
)
from pykbatch.log.files import KRAFT_SNAPSHOT, SNIFF_BYTES, STDIN, head_of, named_as_log
from pykbatch.log.segments import open_input
from pykbatch.log.reports import IndexReport

Found = Callable[[int], object]
"""Told of problems the moment a dump meets them, before the line that shows one is written (a
command's verdict: a reader that goes away after that line must not turn damage into 0)."""

Decoder = Callable[[bytes], str]


def utf8(data: bytes) -> str:
    """Kafka's default StringDecoder: UTF-8, malformed input replaced as the JVM replaces it."""
    return java_utf8(data)


@dataclass(frozen=True)
class Style:
    """Where kafka-dump-log's output changed when Kafka 4.3 rewrote it in Java (KAFKA-14579)."""
    legacy_crc_brace: bool
    """Scala's record lines of v0/v1 messages end the crc with a stray '}'."""
    leader_change_json: bool
    """LEADER_CHANGE control records printed as JSON (``LeaderChange: {...}``)."""
    gaps_from_minus_one: bool
    """Non-consecutive offsets start from -1 (a segment not starting at 0 reports -1 first) and
    are printed in offset order, once per previous offset; Scala: most recent first."""
    index_mismatches_descending: bool
    """Offset-index mismatches printed by index offset, highest first, once each."""
    snapshot_trailing_space: bool
    """Scala's producer-snapshot lines end in a space when the producer has no batch."""


STYLES = {
    "java": Style(False, True, True, True, False),   # Kafka 4.3+: org.apache.kafka.tools.DumpLogSegments
    "scala": Style(True, False, False, False, True),  # Kafka <= 4.2: kafka.tools.DumpLogSegments
}


def _bool(b: bool) -> str:
    return "true" if b else "false"


def batch_line(b, is_valid: bool | None = None) -> str:
    """The batch's line; ``is_valid``: its checksum's verdict when the caller already has it (it
    costs a pass over the batch's bytes)."""
    valid = _bool(b.is_valid if is_valid is None else is_valid)
    if b.magic < 2:
        return (f"offset: {b.last_offset} position: {b.position} {b.timestamp_type}: {b.max_timestamp} "
                f"size: {b.size} magic: {b.magic} compresscodec: {b.compression} crc: {b.crc} "
                f"isvalid: {valid}")
    horizon = "OptionalLong.empty" if b.delete_horizon_ms is None else f"OptionalLong[{b.delete_horizon_ms}]"
    return (f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {b.record_count} "
            f"baseSequence: {b.base_sequence} lastSequence: {b.last_sequence} producerId: {b.producer_id} "
            f"producerEpoch: {b.producer_epoch} partitionLeaderEpoch: {b.partition_leader_epoch} "
            f"isTransactional: {_bool(b.is_transactional)} isControl: {_bool(b.is_control)} "
            f"deleteHorizonMs: {horizon} position: {b.position} {b.timestamp_type}: {b.max_timestamp} "
            f"size: {b.size} magic: {b.magic} compresscodec: {b.compression} crc: {b.crc} "
            f"isvalid: {valid}")


def _control_part(r, style: Style) -> str:
    ctl = parse_control(r.key, r.value)
    if ctl.coordinator_epoch is not None:
        return f" endTxnMarker: {ctl.type_name} coordinatorEpoch: {ctl.coordinator_epoch}"
    if ctl.type in KRAFT_MESSAGES and (ctl.type != 2 or style.leader_change_json):
        return f" {KRAFT_MESSAGES[ctl.type][0]} {kraft_control_json(ctl.type, r.value)}"
    return f" controlType: {ctl.type_name}({ctl.type})"


def record_line(b, r, *, print_data: bool, skip_metadata: bool, parser: "RecordParser",
                style: Style = STYLES["java"]) -> str:
    parts = []
    if not skip_metadata:
        key_size = -1 if r.key is None else len(r.key)
        value_size = -1 if r.value is None else len(r.value)
        parts.append(f"| offset: {r.offset} {b.timestamp_type}: {r.timestamp} keySize: {key_size} "
                     f"valueSize: {value_size}")
        if b.magic >= 2:
            parts.append(f" sequence: {r.sequence} headerKeys: [{','.join(k for k, _ in r.headers)}]")
        else:
            brace = "}" if style.legacy_crc_brace else ""  # sic: the Scala tool printed a stray brace
            parts.append(f" isValid: {_bool(r.is_valid)} crc: {r.crc}{brace}")
        if b.is_control:
            parts.append(_control_part(r, style))
    if print_data and not b.is_control:
        key, payload = parser(r)
        prefix = "| " if skip_metadata else " "
        if key is not None:
            parts.append(f"{prefix}key: {key}")
            prefix = " "
        if payload is not None:
            parts.append(f"{prefix}payload: {payload}")
    return "".join(parts)


# A record's key and payload as the dump prints them (None: not printed), like Kafka's MessageParser.
RecordParser = Callable[[object], "tuple[str | None, str | None]"]


def decoders_parser(key_decoder: Decoder = utf8, value_decoder: Decoder = utf8) -> RecordParser:
    """The parser of --key-decoder / --value-decoder: each side decoded when present."""
    return lambda r: (None if r.key is None else key_decoder(r.key),
                      None if r.value is None else value_decoder(r.value))


def structured_parser(decode: Callable[[bytes], object], error_at: str = "Error at offset") -> RecordParser:
    """The parser of a structured decoder flag for key-less records (--remote-log-metadata-decoder,
    --cluster-metadata-decoder): no key, the value's decoded form, or Kafka's line for a value
    that does not decode (``error_at``: how that decoder's line begins)."""
    def parse(r):
        try:
            return None, decode(r.value)
        except (ValueError, TypeError) as exc:
            message = getattr(exc, "kafka_message", None) or (exc.message if isinstance(exc, KafkaDataError)
                                                              else str(exc))
            return None, f"{error_at} {r.offset}, skipping. {message}"
    return parse


def _coordinator(topic_name: str) -> RecordParser:
    from pykbatch.topics import coordinator
    topic = getattr(coordinator, topic_name)
    return lambda r: coordinator.dump_parts(topic, r)


def _cluster_metadata() -> RecordParser:
    from pykbatch.topics import cluster_metadata
    return structured_parser(cluster_metadata.dump_payload, "Error at")


def _remote_log_metadata() -> RecordParser:
    from pykbatch.tiered.metadata import dump_payload
    return structured_parser(dump_payload)


# kafka-dump-log's --<name>-decoder flags, in Kafka's order of precedence: each makes its parser
# (the internal topics' modules are imported only when one is asked for)
STRUCTURED: dict[str, Callable[[], RecordParser]] = {
    "offsets": lambda: _coordinator("OFFSETS"),
    "transaction-log": lambda: _coordinator("TRANSACTIONS"),
    "cluster-metadata": _cluster_metadata,
    "remote-log-metadata": _remote_log_metadata,
    "share-group-state": lambda: _coordinator("SHARE_STATE"),
}
STRUCTURED_DECODERS = tuple(STRUCTURED)


def parser_for(decoder: str | None = None, key_decoder: Decoder = utf8, value_decoder: Decoder = utf8) -> RecordParser:
    return STRUCTURED[decoder]() if decoder else decoders_parser(key_decoder, value_decoder)


class DumpErrors(IndexReport):
    """What Kafka's tool reports on stderr after every file was dumped (``IndexReport``), in the
    order of the tool's ``style``."""

    def __init__(self, style: Style = STYLES["java"], on_problem: Found | None = None):
        super().__init__(style.index_mismatches_descending, style.gaps_from_minus_one)
        self.style = style
        self.on_problem = on_problem

    def add(self, path: str, problems) -> None:
        problems = list(problems)
        if problems and self.on_problem is not None:
            self.on_problem(len(problems))
        super().add(path, problems)


class _Problems:
    """A dump's count of problems, each told to ``on_problem`` as it is met."""

    __slots__ = ("count", "on_problem")

    def __init__(self, on_problem: Found | None = None):
        self.count = 0
        self.on_problem = on_problem

    def found(self, n: int = 1) -> None:
        if n:
            self.count += n
            if self.on_problem is not None:
                self.on_problem(n)


def dump_files(paths, out: TextIO | None = None, err: TextIO | None = None, *, deep: bool = False,
               print_data: bool = False, skip_metadata: bool = False, max_bytes: int | None = None,
               verify_index_only: bool = False, index_sanity_check: bool = False,
               max_message_size: int = 5 * 1024 * 1024, key_decoder: Decoder = utf8,
               value_decoder: Decoder = utf8, progress: bool = False, style: str = "java",
               decoder: str | None = None, parser: RecordParser | None = None,
               on_problem: Found | None = None, compacted: bool = False) -> int:
    """kafka-dump-log.sh over several files, dispatched by the suffix after the last dot; returns
    the number of problems met (errors, index mismatches).  ``style``: the output of Kafka 4.3+'s
    tool ("java") or of the Scala tool of earlier releases ("scala"); see ``Style``.  ``decoder``:
    a structured decoder's name (``STRUCTURED_DECODERS``), which then prints every payload;
    ``parser``: a record parser of the caller's (the schema registry's), in place of both.
    ``on_problem``: told of each problem as it is met, before it is printed.  ``compacted``: the
    topic is, so offsets missing between batches are the cleaner's, not lost records."""
    out = out or sys.stdout
    parser = parser or parser_for(decoder, key_decoder, value_decoder)
    err = err or sys.stderr
    errors = DumpErrors(STYLES[style], on_problem)
    problems = _Problems(on_problem)
    for path in paths:
        suffix = dump_kind(path)
        if suffix is None:
            err.write(f"Ignoring unknown file {path}\n")
            continue
        out.write(f"Dumping {path}\n")
        try:
            if suffix in (LOG, KRAFT_SNAPSHOT):
                dump_log(path, out, err, deep=deep, print_data=print_data, skip_metadata=skip_metadata,
                         max_bytes=max_bytes, parser=parser, header=False, progress=progress, errors=errors,
                         problems=problems, compacted=compacted)
            elif suffix == OffsetIndex.SUFFIX:
                dump_offset_index(path, out, errors, verify_index_only, index_sanity_check, max_message_size)
            elif suffix == TimeIndex.SUFFIX:
                dump_time_index(path, out, errors, verify_index_only, index_sanity_check)
            else:
                _DUMPERS[suffix](path, out, errors.style)
        except CorruptIndexError as exc:
            problems.found()
            err.write(f"{exc}\n" if suffix == ProducerSnapshot.SUFFIX else f"Error while dumping {path}: {exc}\n")
        except BrokenPipeError:  # the reader went away: the command ends (quietly, pykbatch.commands)
            raise
        except (ValueError, OSError) as exc:  # KafkaDataError and CorruptIndexError are ValueErrors
            problems.found()
            err.write(f"Error while dumping {path}: {exc}\n")
    errors.write(err)
    return problems.count + errors.count


def dump_log(path: str, out: TextIO | None = None, err: TextIO | None = None, *, deep: bool = False,
             print_data: bool = False, skip_metadata: bool = False, max_bytes: int | None = None,
             key_decoder: Decoder = utf8, value_decoder: Decoder = utf8, header: bool = True,
             progress: bool = False, errors: DumpErrors | None = None, parser: RecordParser | None = None,
             problems: _Problems | None = None, compacted: bool = False) -> int:
    """Print one ``.log`` (or KRaft ``.checkpoint``) file as kafka-dump-log does; returns the
    number of problems met.  ``progress``: a percentage line on stderr when it is a terminal
    and the file is large (never when piped).  ``errors``: where a multi-file dump collects what
    it prints at the end; without one, this file's are printed after it.  ``problems``: where a
    multi-file dump counts them as they are met."""
    out = out or sys.stdout
    err = err or sys.stderr
    deep = deep or print_data
    name = os.path.basename(path)
    if header:
        out.write(f"Dumping {path}\n")
    if name.endswith(KRAFT_SNAPSHOT):
        out.write(_snapshot_header(name))
    else:
        stem = name.split(".")[0]
        if stem.isdigit():
            out.write(f"Log starting offset: {int(stem)}\n")
    with open_input(path, 0) as seg:
        if seg.size == 0:
            return 0
        meter = Progress(seg.size, os.path.basename(path), err, enabled=progress)
        own = errors is None
        errors = errors or DumpErrors()
        problems = _Problems() if problems is None else problems
        before = problems.count
        _dump_entries(seg, out, err, deep, print_data, skip_metadata, max_bytes,
                      parser or decoders_parser(key_decoder, value_decoder), meter, errors, problems, compacted)
        if own:
            errors.write(err)
        return problems.count - before


def _snapshot_header(name: str) -> str:
    if name == "bootstrap.checkpoint":
        return "KRaft bootstrap snapshot\n"
    offset, _, epoch = name[:-len(KRAFT_SNAPSHOT)].partition("-")
    if offset.isdigit() and epoch.isdigit():
        return f"Snapshot end offset: {int(offset)}, epoch: {int(epoch)}\n"
    return ""


def unreadable_line(exc: KafkaDataError) -> str:
    """The line printed in place of a record that cannot be read (Kafka's tool dies there; the
    records after it are printed when its length can be trusted: ``Batch.readable``)."""
    return f"| not readable {exc.line()}"


def lost_span_line(span) -> str:
    """The line printed in place of bytes whose entry framing was lost (Kafka's tool dies there,
    or takes an interior size that lies for the end of the log): the walk resumes after them."""
    return (f"unreadable: position: {span.position} size: {span.size} (resumed at position "
            f"{span.position + span.size}) {span.error.line()}")


_ORDER_WORDS = {"log.offsets_not_increasing": "offsets go backwards", "log.offset_gap": "offsets missing before it"}


def order_line(c) -> str:
    """The line printed after a batch whose offsets go backwards, or follow a gap on a topic not
    compacted (Kafka's tool only lists them among the non-consecutive offsets at the end)."""
    return f"| {_ORDER_WORDS.get(c.rule, c.rule)}: at byte {c.position}: {c.name}({c.code}) {c.rule}: {c.message}"


def _dump_entries(seg, out, err, deep, print_data, skip_metadata, max_bytes, parser: RecordParser,
                  meter, errors: DumpErrors, problems: _Problems, compacted: bool = False) -> None:
    """Prints the segment's batches (and records), counting the problems met: batches whose CRC
    does not match, batches whose records cannot be read, spans whose framing was lost, offsets
    that go backwards."""
    pairs = []
    style = errors.style
    last_offset = -1 if style.gaps_from_minus_one else None
    backwards = seg.order_faults(max_bytes, compacted) if named_as_log(seg.path or STDIN) else {}  # a producer's: none

    def lost(span) -> None:
        problems.found()
        out.write(lost_span_line(span) + "\n")

    for b in seg.batches(max_bytes=max_bytes, on_lost=lost):
        if meter:
            meter.update(b.position)
        valid = b.is_valid
        problems.found(not valid)
        out.write(batch_line(b, valid) + "\n")
        order = backwards.get(b.position)
        if order is not None:
            problems.found()
            out.write(order_line(order) + "\n")
        if deep:
            if hasattr(parser, "begin_batch"):  # a parser that decodes a batch's values as one column
                parser.begin_batch(b)
            for r in b.readable():  # the batch's framing holds: its unreadable records are named, never fatal
                if isinstance(r, KafkaDataError):
                    problems.found()
                    out.write(unreadable_line(r) + "\n")
                    continue
                if last_offset is not None and r.offset != last_offset + 1:
                    pairs.append((last_offset, r.offset))
                last_offset = r.offset
                out.write(record_line(b, r, print_data=print_data, skip_metadata=skip_metadata,
                                      parser=parser, style=style) + "\n")
        del b
    if meter:
        meter.finish()
    if max_bytes is None and seg.invalid_tail_bytes > 0:
        out.write(f"Found {seg.invalid_tail_bytes} invalid bytes at the end of {os.path.basename(str(seg.path))}\n")
    if pairs:
        errors.non_consecutive.setdefault(os.path.abspath(seg.path), []).extend(pairs)


def dump_offset_index(path: str, out: TextIO, errors: DumpErrors, verify_only: bool = False,
                      sanity_only: bool = False, max_message_size: int = 5 * 1024 * 1024) -> None:
    """DumpLogSegments.dumpIndex: each entry checked against the first batch at its position."""
    index = OffsetIndex.from_file(path)
    if index.slots == 0:
        out.write(f"{path} is empty.\n")
        return
    if sanity_only:
        index.sanity_check()
        out.write(f"{path} passed sanity check.\n")
        return
    with Segment(sibling(path, LOG), base_offset=index.base_offset) as seg:
        for entry, problems in index.check(seg, max_message_size):
            errors.add(path, problems)
            if not verify_only:
                out.write(f"offset: {entry.offset} position: {entry.position}\n")


def dump_time_index(path: str, out: TextIO, errors: DumpErrors, verify_only: bool = False,
                    sanity_only: bool = False) -> None:
    """DumpLogSegments.dumpTimeIndex: each entry's offset must end a batch whose largest record
    timestamp is the entry's, and entry timestamps must increase."""
    tindex = TimeIndex.from_file(path)
    if sanity_only:
        tindex.sanity_check()
        out.write(f"{path} passed sanity check.\n")
        return
    with Segment(sibling(path, LOG), base_offset=tindex.base_offset) as seg:
        for entry, problems in tindex.check(seg):
            errors.add(path, problems)
            if not verify_only:
                out.write(f"timestamp: {entry.timestamp} offset: {entry.offset}\n")


def dump_snapshot(path: str, out: TextIO, style: Style = STYLES["java"]) -> None:
    """DumpLogSegments.dumpProducerIdSnapshot: one line per producer."""
    for entry in ProducerSnapshot.from_file(path).entries:
        line = entry.dump_line()
        if not entry.has_batch and style.snapshot_trailing_space:
            line += " "
        out.write(line + "\n")


def dump_txn_index(path: str, out: TextIO, style: Style = STYLES["java"]) -> None:
    for txn in TxnIndex.from_file(path).entries:
        out.write(txn.dump_line() + "\n")


# the printers of the files that need only their own bytes (the indexes are checked against their log)
_DUMPERS = {ProducerSnapshot.SUFFIX: dump_snapshot, TxnIndex.SUFFIX: dump_txn_index}


# -- JSON output (--format json|jsonl; schema: pykbatch/schemas/dump.schema.json) --------------

# a selection of pykbatch.columns.BATCH (names only: the text dump does not load pyarrow)
BATCH_FIELDS = ("base_offset", "last_offset", "record_count", "base_sequence", "last_sequence", "producer_id",
                "producer_epoch", "partition_leader_epoch", "is_transactional", "is_control", "delete_horizon_ms",
                "position", "timestamp_type", "max_timestamp", "size", "magic", "compression", "crc", "is_valid")


def batch_object(b) -> dict:
    return {name: getattr(b, name) for name in BATCH_FIELDS}


def json_bytes(data: bytes | None) -> tuple[str | None, str | None]:
    """Bytes as JSON carries them without loss: ``(text, "utf8")`` when they are valid UTF-8,
    else ``(base64, "base64")``; ``(None, None)`` for null.  Each key, value and header value of
    the JSON dump is written so, beside a ``*_encoding`` field naming which."""
    if data is None:
        return None, None
    try:
        return bytes(data).decode("utf-8"), "utf8"
    except UnicodeDecodeError:
        import base64
        return base64.b64encode(bytes(data)).decode("ascii"), "base64"


def record_object(b, r, *, print_data: bool, parser: RecordParser | None = None,
                  where: dict | None = None) -> dict:
    """A record as the JSON dump writes it: its metadata; with ``print_data`` its key, value
    and headers, losslessly (``json_bytes``), and with a decoder (``parser``) the decoded text
    the text dump would print, under ``decoded``.  ``where``: topic and partition, if known."""
    obj = dict(where or {})
    obj.update(offset=r.offset, timestamp=r.timestamp, key_size=-1 if r.key is None else len(r.key),
               value_size=-1 if r.value is None else len(r.value), sequence=r.sequence,
               header_keys=[k for k, _ in r.headers])
    if b.magic < 2:
        obj.update(crc=r.crc, is_valid=r.is_valid)
    if b.is_control:
        ctl = parse_control(r.key, r.value)
        obj.update(control_type=ctl.type_name, coordinator_epoch=ctl.coordinator_epoch)
    elif print_data:
        obj["key"], obj["key_encoding"] = json_bytes(r.key)
        obj["value"], obj["value_encoding"] = json_bytes(r.value)
        obj["headers"] = [dict(zip(("key", "value", "value_encoding"), (k, *json_bytes(v)))) for k, v in r.headers]
        if parser is not None:
            key, payload = parser(r)
            obj["decoded"] = {"key": key, "payload": payload}
    return obj


def can_dump(path: str) -> bool:
    """Whether the dump reads this file (by its suffix, as kafka-dump-log dispatches; "-": a log
    on standard input)."""
    return path == STDIN or suffix_of(path) in (LOG, KRAFT_SNAPSHOT) + tuple(kind.SUFFIX for kind in INDEX_TYPES)


def dump_kind(path: str) -> str | None:
    """The suffix a file is dumped as: its own (kafka-dump-log dispatches so), ``.log`` for
    standard input and for a file whose name says nothing but whose bytes read as record batches
    (``pykbatch sample --out sample.bin``: validate reads it, so the dump does); None: not dumped."""
    if can_dump(path):
        return LOG if path == STDIN else suffix_of(path)
    from pykbatch.log.checks import kind_of
    if kind_of(path) is not None:
        return None
    head = head_of(path)
    if head is None:
        return None
    from pykbatch import _native
    reader = _native.iter_batches(head, verify_crc=False, strict=False)
    try:
        first = next(iter(reader), None)
    except KafkaDataError:
        return None
    if first is None:  # one entry larger than what was read: its magic byte says
        tail = reader.truncated_tail
        return LOG if tail is not None and len(head) == SNIFF_BYTES and head[16:17] in (b"\0", b"\1", b"\2") else None
    return LOG if first.is_valid else None


def dump_json(paths, out: TextIO | None = None, err: TextIO | None = None, *, lines: bool = False,
              deep: bool = False, print_data: bool = False, max_bytes: int | None = None,
              parser: RecordParser | None = None, on_problem: Found | None = None, compacted: bool = False) -> int:
    """``.log`` files as JSON: one document (``lines=False``: files -> batches -> records) or JSON
    lines (one object per batch, per record, per unreadable span, and one closing each file).
    ``parser``: a decoder's parser (``parser_for``), whose text goes beside the bytes.  Returns
    the problems met, as ``dump_files`` counts them (each told to ``on_problem`` as it is met).
    An entry whose offsets go backwards carries the culprit under ``order``."""
    import json
    out = out or sys.stdout
    err = err or sys.stderr
    deep = deep or print_data
    problems = _Problems(on_problem)
    files = []
    for path in paths:
        if dump_kind(path) not in (LOG, KRAFT_SNAPSHOT):
            err.write(f"Ignoring unknown file {path}\n")
            continue
        named = topic_partition_of(os.path.dirname(os.path.abspath(path)))
        where = {"topic": named[0], "partition": named[1]} if named else {}
        doc = {"file": path, **where, "batches": [], "unreadable": []}

        def lost(span) -> None:
            obj = {"position": span.position, "size": span.size, "error": span.error.as_dict()}
            problems.found()
            if lines:
                out.write(json.dumps({"type": "unreadable", "file": path, **obj}) + "\n")
            else:
                doc["unreadable"].append(obj)

        with open_input(path, 0) as seg:
            backwards = seg.order_faults(max_bytes, compacted) if seg.size and named_as_log(path) else {}
            for b in seg.batches(max_bytes=max_bytes, on_lost=lost):
                obj = batch_object(b)
                problems.found(not obj["is_valid"])
                if b.position in backwards:
                    obj["order"] = backwards[b.position].as_dict()
                    problems.found()
                records = None
                if deep:
                    if hasattr(parser, "begin_batch"):
                        parser.begin_batch(b)
                    records, unreadable = [], []
                    for r in b.readable():
                        if isinstance(r, KafkaDataError):
                            unreadable.append(r.as_dict())
                            problems.found()
                        else:
                            records.append(record_object(b, r, print_data=print_data, parser=parser, where=where))
                    if unreadable:  # the records that could not be read; the others are listed
                        obj["error"], obj["unreadable"] = unreadable[0], unreadable
                if lines:
                    out.write(json.dumps({"type": "batch", "file": path, **obj}) + "\n")
                    for rec in records or ():
                        out.write(json.dumps({"type": "record", "file": path,
                                              "batch_position": b.position, **rec}) + "\n")
                else:
                    if records is not None:
                        obj["records"] = records
                    doc["batches"].append(obj)
                del b
            end = {"valid_bytes": seg.valid_bytes, "invalid_tail_bytes": seg.invalid_tail_bytes,
                   "error": None if seg.error is None else str(seg.error)}
        if lines:
            out.write(json.dumps({"type": "end", "file": path, **end}) + "\n")
        else:
            doc.update(end)
            files.append(doc)
    if not lines:
        out.write(json.dumps({"files": files}, indent=1) + "\n")
    return problems.count
