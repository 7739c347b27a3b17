"""What a consumer makes of one partition's records in a fetch response: the records it can
deliver, the offsets it must move past (each with its culprits), and where to fetch next.

No network here: ``read_fetched`` takes the bytes a broker answered with, so it is tested on
bytes made offline as well as on a live cluster's.

* Sound batches: their records from the fetch offset on (a broker answers with the whole batch
  holding the fetch offset), through ``read_committed`` when asked (``pykbatch.kafka.isolation``).
* A batch whose CRC does not match (or a v0/v1 message with any fault) or bytes whose framing is lost: nothing of it is delivered (its bytes are not
  what was written, so neither is any record read from them).  Its offsets are known once a sound
  batch follows it: the skip is ``[position, next sound base offset - 1]``.  When nothing sound
  follows in this response, the extent is not known yet (``Fetched.damage``): the reader finds it
  with the broker (``pykbatch.live.probe``).
* A v2 batch whose CRC holds but whose records break the format (a record length that lies, a
  payload its codec refuses): the bytes are the writer's, so the records read before the first
  broken one are delivered; from that one to the batch's last offset (CRC-checked, so the
  writer's) is a skip.
* An incomplete batch at the end is normal (the broker cuts responses at the fetch size, KIP-74):
  the next fetch starts at its offset; ``Fetched.partial_size`` says how large it claims to be
  when nothing before it was complete, so the reader can ask for that much.
* Offsets no batch holds: on a compacted topic, records compaction removed (``compacted``); on any
  other topic, damage the broker passed over.  Between two batches of the response the bytes meet,
  so the range is a skip (``consumer.offset_gap``); before the first batch (the broker answered a
  fetch from a later batch) sound batches may still be served inside it, so ``Fetched.lead_gap``
  leaves the range to the reader, which probes it.

Every offset from the fetch offset to ``next_offset`` is in ``Fetched.spans`` exactly once: read
(a batch's range, delivered or left out by Kafka's semantics: control records, aborted
transactions), skipped, or compacted away (``Ledger`` in ``pykbatch.live.ledger`` holds the reader
to that).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import pyarrow as pa

from pykbatch import _native, errors
from pykbatch.arrow import decode_entries, spark_timestamps
from pykbatch.columns import CONSUMED, RECORDS
from pykbatch.config import ValidationConfig
from pykbatch.kafka.isolation import DROP, HOLD, Isolation
from pykbatch.result import Culprit
from pykbatch.rules import BY_ID

# Kafka's verdict only (strict=False: a consumer delivers what pykbatch's extra rules would flag),
# every culprit kept, no producer-side size limits
CONSUMER_CHECKS = ValidationConfig(origin="log", strict=False, max_culprits=2**31 - 1, max_message_bytes=None,
                                   segment_bytes=None)
READ, SKIPPED, COMPACTED = "read", "skipped", "compacted"  # what a span of offsets became
CRC_MISMATCH = "batch.crc_mismatch"  # the bytes are not what was written: nothing read from them is delivered
OFFSET_GAP = "consumer.offset_gap"
HEADER_PREFIX = 12  # base offset + length: a partial entry's claimed size needs these
CONSUMED_SCHEMA = pa.schema(CONSUMED)


@dataclass
class Skip:
    """Offsets ``[first_offset, last_offset]`` of a partition that a reader moved past without
    delivering them: unreadable (``held`` False) or held back undecided (``held``: a transaction
    whose marker could not be read).  ``position``: the byte of the first culprit in the fetched
    records; ``data``: the skipped bytes (for dead letters; never logged unless asked)."""
    topic: str
    partition: int
    first_offset: int
    last_offset: int
    rule: str
    code: int
    message: str
    position: int | None = None
    culprits: list = field(default_factory=list, repr=False)
    data: bytes | None = field(default=None, repr=False)
    held: bool = False
    reported: bool = False
    """A consumer group's member reported the range before (its commit metadata names it):
    skipped again by the member that took the partition over, not reported twice."""

    @property
    def count(self) -> int:
        """Offsets in the range (a compacted log may hold fewer records)."""
        return max(0, self.last_offset - self.first_offset + 1)

    @property
    def name(self) -> str:
        return errors.error_name(self.code)

    def as_dict(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "first_offset": self.first_offset,
                "last_offset": self.last_offset, "rule": self.rule, "code": self.code, "name": self.name,
                "message": self.message, "position": self.position, "held": self.held, "reported": self.reported,
                "culprits": [c.as_dict() if isinstance(c, Culprit) else c for c in self.culprits]}

    def line(self) -> str:
        what = "held back" if self.held else "skipped again (the group reported it)" if self.reported else "skipped"
        return (f"{self.topic}-{self.partition} offsets [{self.first_offset}, {self.last_offset}] {what}: "
                f"{self.name}({self.code}) {self.rule}: {self.message}")


@dataclass
class Damage:
    """Unreadable entries at the end of a response whose extent in offsets is not known yet."""
    first_offset: int
    position: int
    culprits: list
    data: bytes

    def skip(self, topic: str, partition: int, last_offset: int) -> Skip:
        first = self.culprits[0]
        return Skip(topic, partition, self.first_offset, last_offset, first.rule, first.code, first.message,
                    self.position, list(self.culprits), self.data)


@dataclass
class Fetched:
    table: pa.Table
    """The records delivered, in offset order (the reader's columns, ``pykbatch.columns.CONSUMED``)."""
    skips: list[Skip]
    next_offset: int
    """Where the next fetch of the partition starts."""
    damage: Damage | None = None
    """Unreadable bytes ending the response; ``next_offset`` is where they begin."""
    partial_size: int | None = None
    """The size an incomplete first entry claims (the response held no complete one)."""
    bytes_read: int = 0
    spans: list = field(default_factory=list)
    """``(first, last, kind)`` from the fetch offset to ``next_offset``, in order: ``READ``,
    ``SKIPPED``, ``COMPACTED`` (``lead_gap`` is not in them: the reader accounts for it)."""
    lead_gap: tuple[int, int] | None = None
    """Offsets ``[fetch offset, first batch's base - 1]`` the broker passed over (not compacted)."""


def _claimed_size(data, pos: int) -> int | None:
    if len(data) - pos < HEADER_PREFIX:
        return None
    return int.from_bytes(bytes(data[pos + 8:pos + 12]), "big", signed=True) + HEADER_PREFIX


def _readable_prefix(data, batch, culprits: list, fetch_from: int):
    """The records of a CRC-sound batch before its first broken one, as a table, and the offset
    where the unreadable part starts."""
    entry = bytes(data[batch.position:batch.position + batch.size])
    first_bad = min((c.record_index for c in culprits if c.record_index is not None), default=2**31)
    kept = []
    try:
        for i, r in enumerate(next(iter(_native.iter_batches(entry, verify_crc=False)))):
            if i >= first_bad:
                break
            kept.append(r)
    except errors.KafkaDataError:
        pass
    start = kept[-1].offset + 1 if kept else max(batch.base_offset, fetch_from)
    rows = [r for r in kept if r.offset >= fetch_from]
    return _records_table(batch, rows), start


def _records_table(batch, records) -> pa.Table:
    """``records`` of ``batch`` with ``to_arrow``'s columns (the rare path of a partly broken batch)."""
    schema = RECORDS
    n = len(records)
    cols = {
        "offset": [r.offset for r in records], "timestamp": [r.timestamp for r in records],
        "key": [r.key for r in records], "value": [r.value for r in records],
        "headers": [[{"key": k, "value": v} for k, v in r.headers] for r in records],
        "sequence": [r.sequence for r in records], "batch_index": [batch.entry] * n,
        "batch_position": [batch.position] * n, "base_offset": [batch.base_offset] * n,
        "partition_leader_epoch": [batch.partition_leader_epoch] * n, "producer_id": [batch.producer_id] * n,
        "producer_epoch": [batch.producer_epoch] * n, "is_transactional": [batch.is_transactional] * n,
        "is_control": [batch.is_control] * n,
    }
    arrays = [pa.array(cols[f.name], f.type) if f.name in cols else
              pa.array([batch.timestamp_type] * n, pa.string()).dictionary_encode().cast(f.type)
              for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def gap_skip(topic: str, partition: int, first: int, last: int) -> Skip:
    """Offsets ``[first, last]`` no batch held, on a topic that is not compacted."""
    rule = BY_ID[OFFSET_GAP]
    return Skip(topic, partition, first, last, rule.id, rule.code, rule.message(first=first, last=last, next=last + 1))


def read_fetched(data, fetch_offset: int, *, topic: str = "t", partition: int = 0,
                 isolation: Isolation | None = None, checks: ValidationConfig = CONSUMER_CHECKS,
                 compacted: bool = False) -> Fetched:
    """One partition's ``records`` from a fetch at ``fetch_offset`` (see the module's doc);
    ``compacted``: the topic's ``cleanup.policy`` has compact (offsets may be missing)."""
    isolation = isolation or Isolation()
    data = memoryview(data) if not isinstance(data, memoryview) else data
    at_once = _read_at_once(data, fetch_offset, topic, partition, isolation, compacted)
    if at_once is not None:
        return at_once
    return _read_carefully(data, fetch_offset, topic, partition, isolation, checks, compacted)


def _read_at_once(data, fetch_offset: int, topic: str, partition: int, isolation: Isolation,
                  compacted: bool) -> Fetched | None:
    """The common case in one walk of the core (``_native.consume``): sound batches, markers,
    aborted transactions, offsets compaction removed.  None: the careful path reads it."""
    if isolation.undecided or isolation.aborted:
        return None  # an earlier unreadable entry left producers undecided: the careful path holds them
    got = _native.consume(data, fetch_offset, topic=topic, partition=partition, committed=isolation.committed,
                          last_stable_offset=isolation.last_stable_offset, compacted=compacted,
                          aborted=isolation.pending)
    if got is None or not got[3]:  # damage, or no complete entry (an incomplete one's size is read carefully)
        return None
    table, next_offset, spans, _, _, aborted = got
    isolation.settled(aborted, next_offset)
    return Fetched(table, [], next_offset, None, None, len(data), spans, None)


def _read_carefully(data, fetch_offset: int, topic: str, partition: int, isolation: Isolation,
                    checks: ValidationConfig, compacted: bool) -> Fetched:
    """Every culprit named: the validator's verdict per entry, the readable part of each batch."""
    if checks.topic_partition != f"{topic}-{partition}":  # Kafka's messages name the partition
        checks = replace(checks, topic_partition=f"{topic}-{partition}")
    lost: list = []
    reader = _native.BatchReader(data, verify_crc=False, on_lost=lost.append)
    batches = list(reader)
    tail = reader.truncated_tail
    by_entry: dict[int, list] = {}
    if batches or lost:
        for c in _native.validate(data, checks).culprits:
            by_entry.setdefault(c.entry, []).append(c)
    # entries in order: batches and lost spans share the walk's numbering
    items = sorted([(b.entry, b) for b in batches] + [(s.entry, s) for s in lost], key=lambda x: x[0])

    position = fetch_offset
    skips: list[Skip] = []
    spans: list[tuple[int, int, str]] = []
    lead_gap = None
    pieces: list[pa.Table] = []
    run: list[tuple[int, int]] = []  # consecutive entries to decode at once
    damage: Damage | None = None

    def flush_run():
        if run:
            table, _ = decode_entries(data, list(run), verify_crc=False)  # checked by the validator
            pieces.append(table)
            run.clear()

    def add_damage(pos: int, size: int, culprits: list):
        nonlocal damage
        flush_run()
        chunk = bytes(data[pos:pos + size])
        if damage is None:
            damage = Damage(position, culprits[0].position if culprits else pos, list(culprits), chunk)
        else:
            damage.culprits += culprits
            damage.data += chunk

    for entry, item in items:
        culprits = by_entry.get(entry, [])
        if not hasattr(item, "base_offset"):  # a span whose framing was lost
            add_damage(item.position, item.size, culprits or [_lost_culprit(item)])
            continue
        b = item
        if culprits and (b.magic < 2 or any(c.rule == CRC_MISMATCH for c in culprits)):
            add_damage(b.position, b.size, culprits)
            continue
        if damage is not None:
            if b.base_offset <= position and b.last_offset < position:
                continue  # a batch before the damage's first offset: nothing new
            if b.base_offset > position:  # else the damage lay before the fetch offset
                skips.append(damage.skip(topic, partition, b.base_offset - 1))
                _span(spans, position, b.base_offset - 1, SKIPPED)
                isolation.unreadable(b.base_offset - 1)
                position = b.base_offset
            damage = None
        if b.last_offset < position:
            continue  # wholly before the fetch offset
        if isolation.past_end(b):
            break
        if b.base_offset > position:  # offsets no batch holds
            if compacted:
                _span(spans, position, b.base_offset - 1, COMPACTED)
            elif not spans and lead_gap is None:
                lead_gap = (position, b.base_offset - 1)
            else:
                skips.append(gap_skip(topic, partition, position, b.base_offset - 1))
                _span(spans, position, b.base_offset - 1, SKIPPED)
                isolation.unreadable(b.base_offset - 1)
            position = b.base_offset
        decision = isolation.decide(b)
        if culprits:  # CRC sound, records broken: the readable prefix, then a skip
            flush_run()
            table, bad_from = _readable_prefix(data, b, culprits, position)
            if decision != DROP and table.num_rows:
                pieces.append(table)
            first = culprits[0]
            if bad_from > position:
                _span(spans, position, bad_from - 1, READ)
            skips.append(Skip(topic, partition, max(bad_from, position), b.last_offset, first.rule, first.code,
                              first.message, first.position, culprits, bytes(data[b.position:b.position + b.size])))
            _span(spans, skips[-1].first_offset, b.last_offset, SKIPPED)
        elif decision == HOLD:
            flush_run()
            first = max(b.base_offset, position)
            rule = BY_ID["consumer.marker_unreadable"]
            skips.append(Skip(topic, partition, first, b.last_offset, rule.id, rule.code,
                              rule.message(producer_id=b.producer_id, offset=first), b.position, [],
                              bytes(data[b.position:b.position + b.size]), held=True))
            _span(spans, first, b.last_offset, SKIPPED)
        elif decision != DROP:
            if run and run[-1][0] + run[-1][1] != b.position:
                flush_run()
            run.append((b.position, b.size))
            _span(spans, position, b.last_offset, READ)
        else:
            flush_run()
            _span(spans, position, b.last_offset, READ)
        position = b.last_offset + 1
    flush_run()
    if damage is not None:
        # its extent comes later: every producer aborted so far may have ended there; the next
        # response's aborted list decides again those whose transactions go on past it
        isolation.unreadable(2**63 - 1)

    table = pa.concat_tables(pieces) if pieces else RECORDS.empty_table()
    if table.num_rows and table.column("offset")[0].as_py() < fetch_offset:
        import pyarrow.compute as pc
        table = table.filter(pc.greater_equal(table.column("offset"), fetch_offset))
    table = consumer_columns(table, topic, partition)
    partial = None
    if tail is not None and damage is None and not batches:
        partial = _claimed_size(data, tail.position)
    return Fetched(table, skips, position, damage, partial, len(data), spans, lead_gap)


def consumer_columns(table: pa.Table, topic: str, partition: int) -> pa.Table:
    """``to_arrow``'s records as the reader's columns (``CONSUMED``): the careful path's; the
    core's walk fills them so directly."""
    n = table.num_rows
    timestamp, timestamp_type = spark_timestamps(table.column("timestamp").combine_chunks(),
                                                 table.column("timestamp_type").combine_chunks())
    cols = {"key": table.column("key"), "value": table.column("value"),
            "topic": pa.repeat(pa.scalar(topic, CONSUMED_SCHEMA.field("topic").type), n),
            "partition": pa.repeat(pa.scalar(partition, CONSUMED_SCHEMA.field("partition").type), n),
            "offset": table.column("offset"), "timestamp": timestamp, "timestampType": timestamp_type,
            "headers": table.column("headers"), "leader_epoch": table.column("partition_leader_epoch")}
    return pa.Table.from_arrays([cols[f.name] for f in CONSUMED_SCHEMA], schema=CONSUMED_SCHEMA)


def _span(spans: list, first: int, last: int, kind: str) -> None:
    """``[first, last]`` became ``kind``; joined to the span before it when they meet."""
    if spans and spans[-1][2] == kind and spans[-1][1] + 1 == first:
        spans[-1] = (spans[-1][0], last, kind)
    else:
        spans.append((first, last, kind))


def _lost_culprit(span) -> Culprit:
    exc = span.error
    return Culprit(span.entry, None, None, exc.code, exc.rule, exc.offset, None, span.position, exc.message, None, True)
