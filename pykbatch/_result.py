"""Validation configuration and results (the KIP-467 shape, with every culprit)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from . import errors
from ._catalogue import CODEC_IDS, CODEC_NAMES, CREATE_TIME, TIMESTAMP_TYPES
from ._rules import BY_ID as _RULES_BY_ID
from ._rules import STAGES as _STAGES

ORIGINS = ("client", "log", "replication")
LONG_MAX = 2**63 - 1
KAFKA4_AFTER_MAX_MS = 3_600_000  # message.timestamp.after.max.ms since Kafka 4.0 (KIP-1030)
# Kafka's compression.type values; "producer" keeps each batch's own codec
# a topic's compression.type: "producer" keeps each batch's codec, "uncompressed" is codec none
TARGET_COMPRESSIONS = ("producer", "uncompressed") + CODEC_NAMES[1:]

# Kafka's broker validation metrics (KIP-467) and the rules that feed each.
BROKER_METRICS = {
    "no_key_compacted_topic_records": ("record.compacted_no_key",),
    "invalid_magic_number_records": ("framing.invalid_magic", "legacy.inner_magic"),
    "invalid_message_crc_records": ("batch.crc_mismatch", "legacy.inner_crc_mismatch"),
    "non_increasing_offset_records": ("record.offset_not_increasing",),
}


@dataclass(frozen=True)
class ValidationConfig:
    """What to check and how to report it.

    origin
        ``"client"``: the bytes are a producer's batch as a partition leader
        receives it (Kafka's checks B2-B4: ``lastOffsetDelta + 1 == count``,
        record offset deltas equal to their index, maxTimestamp equal to the
        largest record timestamp).  ``"log"``: batches already in a log, where
        compaction removes records but keeps ``lastOffsetDelta`` and
        ``maxTimestamp``; offset deltas must only increase and stay within
        ``lastOffsetDelta``.  ``"replication"``: the same, named after Kafka's
        AppendOrigin for a follower's fetch of a leader's log.
    verify_crc
        Check the CRC-32C of every batch.
    strict
        Also apply pykbatch's rules that Kafka does not enforce (``Culprit.kafka`` is
        False for them): record offset deltas increasing and within ``lastOffsetDelta``
        (and equal to the index for ``"client"``), record timestamps not above
        ``maxTimestamp``.  False gives Kafka's verdict alone.
    max_culprits
        Culprits kept in the result; ``culprit_count`` still counts all.
    compacted
        The topic's ``cleanup.policy`` contains ``compact``: every record needs a key.
    timestamp_type
        The topic's ``message.timestamp.type``: ``"CreateTime"`` (records must fall in the window
        below) or ``"LogAppendTime"`` (the broker stamps; producers may not).
    timestamp_before_max_ms, timestamp_after_max_ms
        ``message.timestamp.before.max.ms`` / ``after.max.ms`` (KIP-937), measured from ``now_ms``
        (default: the time of the call).  Kafka 4's defaults: no limit into the past
        (Long.MAX_VALUE), one hour into the future (KIP-1030).  The timestamp rules judge a
        producer's append against the leader's clock, so they apply to ``origin="client"`` only.
    max_decompressed_bytes
        Cap on the decompressed records of one batch, enforced while decompressing; a batch
        that would pass it gets a ``batch.decompressed_too_large`` culprit (default 64 MiB:
        64:1 compression of Kafka's default 1 MiB max.request.size / message.max.bytes).
    topic_partition
        Rendered into Kafka's messages (``"topic partition t-0"``).
    max_message_bytes
        The topic's ``max.message.bytes`` (Kafka's default 1048588); a client batch above it is
        MESSAGE_TOO_LARGE.  None: unchecked.
    segment_bytes
        The topic's ``segment.bytes`` (default 1 GiB); client bytes above it are
        RECORD_LIST_TOO_LARGE.  None: unchecked.
    target_magic
        The topic's record version: 2 on every Kafka 3.0+ broker (KIP-724).  0 or 1 checks what
        a down-converting broker refuses (transactional / idempotent batches, record headers).
    target_compression
        The topic's ``compression.type``: ``"producer"`` (default) keeps each batch's codec;
        together with ``target_magic`` it picks Kafka's validation path.
    single_append
        The buffer is one partition's records of one produce request, so Kafka's rules for an
        append as a whole apply: one batch when magic 2 or compressed
        ("Compressed outer record has more than one batch"), one magic throughout (B1).
        False (default): a stream of batches, each checked on its own.
    produce_version
        The ProduceRequest version the bytes came in (3+): also Kafka's request-level checks,
        with their messages ("Produce requests with version N ..."); implies ``single_append``.
    timestamp_difference_max_ms
        The deprecated ``message.timestamp.difference.max.ms`` of a Kafka 3.x topic (removed in
        4.0): it stands in for a window limit left at its default (``timestamp_window``).
    """

    origin: str = "client"
    verify_crc: bool = True
    strict: bool = True
    max_culprits: int = 1000
    topic_partition: str = "t-0"
    max_decompressed_bytes: int = 64 * 1024 * 1024
    compacted: bool = False
    timestamp_type: str = CREATE_TIME
    timestamp_before_max_ms: int = LONG_MAX
    timestamp_after_max_ms: int = KAFKA4_AFTER_MAX_MS
    now_ms: int | None = None
    max_message_bytes: int | None = 1048588
    segment_bytes: int | None = 1024 * 1024 * 1024
    target_magic: int = 2
    target_compression: str = "producer"
    single_append: bool = False
    produce_version: int | None = None
    timestamp_difference_max_ms: int | None = None

    @property
    def target_codec(self) -> int:
        """The codec id the topic stores batches in (``target_compression``); -1 for "producer"."""
        if self.target_compression == "producer":
            return -1
        return CODEC_IDS.get(self.target_compression, 0)  # "uncompressed"

    @property
    def reencodes(self) -> bool:
        """Whether the topic re-encodes every producer batch (its ``compression.type`` is not
        ``producer``, or it stores an older record version)."""
        return self.target_compression != "producer" or self.target_magic < 2

    @property
    def timestamp_window(self) -> tuple[int, int]:
        """The (before, after) limits in force: the deprecated difference setting stands in for
        a limit left at its default, as Kafka 3.6-3.9 read them (LogConfig)."""
        before, after = self.timestamp_before_max_ms, self.timestamp_after_max_ms
        diff = self.timestamp_difference_max_ms
        if diff is not None:
            before = diff if before == LONG_MAX else before
            after = diff if after in (LONG_MAX, KAFKA4_AFTER_MAX_MS) else after
        return before, after

    def __post_init__(self):
        if self.origin not in ORIGINS:
            raise ValueError(f"origin must be one of {ORIGINS}, not {self.origin!r}")
        if self.max_culprits < 0:
            raise ValueError("max_culprits must be >= 0")
        if self.max_decompressed_bytes < 0:
            raise ValueError("max_decompressed_bytes must be >= 0")
        if self.timestamp_type not in TIMESTAMP_TYPES:
            raise ValueError(f"timestamp_type must be {' or '.join(map(repr, TIMESTAMP_TYPES))}")
        if self.timestamp_before_max_ms < 0 or self.timestamp_after_max_ms < 0 \
                or (self.timestamp_difference_max_ms or 0) < 0:
            raise ValueError("timestamp windows must be >= 0")
        for name in ("max_message_bytes", "segment_bytes"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0 or None")
        if self.target_magic not in (0, 1, 2):
            raise ValueError("target_magic must be 0, 1 or 2")
        if self.target_compression not in TARGET_COMPRESSIONS:
            raise ValueError(f"target_compression must be one of {TARGET_COMPRESSIONS}")
        if self.produce_version is not None and not 3 <= self.produce_version < 32768:
            raise ValueError("produce_version: Kafka checks the records of ProduceRequest v3 and later")


class TruncatedTail(NamedTuple):
    """An incomplete entry at the end of the buffer: normal for fetch responses
    and live segments, so it is reported apart from the culprits."""
    entry: int
    position: int


class Culprit:
    """One violation: which batch and record broke which rule, and where."""

    __slots__ = ("entry", "record_index", "relative_offset", "code", "rule", "position", "inner_position",
                 "entry_position", "message", "detail", "kafka")

    def __init__(self, entry, record_index, relative_offset, code, rule, position, inner_position,
                 entry_position, message, detail, kafka):
        self.entry = entry
        self.inner_position = inner_position
        self.entry_position = entry_position
        self.record_index = record_index
        self.relative_offset = relative_offset
        self.code = code
        self.rule = rule
        self.position = position
        self.message = message
        self.detail = detail
        self.kafka = kafka

    @property
    def name(self) -> str:
        return errors.error_name(self.code)

    @property
    def error_class(self) -> str:
        return errors.classify(self.code)

    def as_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__slots__}
        d["name"] = self.name
        return d

    def __repr__(self):
        where = f"entry {self.entry}"
        if self.record_index is not None:
            where += f" record {self.record_index}"
        return f"<Culprit {self.rule} {self.name}({self.code}) {where} at byte {self.position}: {self.message}>"

    def __eq__(self, other):
        return isinstance(other, Culprit) and self.as_dict() == other.as_dict()


@dataclass
class ValidationResult:
    culprits: list
    culprit_count: int
    entries: int
    records: int
    valid_bytes: int
    truncated_tail: TruncatedTail | None
    stopped_at: int | None
    """Where the entry framing was lost (an entry's size field below Kafka's minimum): the
    bytes from here on were not read.  None when the whole buffer was read."""
    unwalked_batches: int
    """Compressed batches whose records were not read (only when no decompressor is wired in)."""
    config: ValidationConfig = field(repr=False, default_factory=ValidationConfig)
    counters: dict = field(default_factory=dict)
    """Culprits per rule id, every one counted (past ``max_culprits`` too)."""

    @property
    def metrics(self) -> dict:
        """The broker's validation metrics (KIP-467) for this input, by their Kafka names, plus
        one ``<rule>_records`` counter per further rule, for pipelines to chart."""
        out = {name: sum(self.counters.get(r, 0) for r in rules) for name, rules in BROKER_METRICS.items()}
        named = {r for rules in BROKER_METRICS.values() for r in rules}
        for rule, n in self.counters.items():
            if rule not in named:
                out[rule.replace(".", "_") + "_records"] = n
        return out

    @property
    def ok(self) -> bool:
        return self.culprit_count == 0

    def _verdict_culprits(self) -> list:
        """The culprits Kafka's answer comes from: those of the earliest (stage, entry), the
        order in which a partition leader runs its checks (pykbatch._rules.STAGES)."""
        if len(self.culprits) < 2:
            return list(self.culprits)
        keys = [_verdict_key(c, self.config) for c in self.culprits]
        first = min(keys)
        return [c for c, key in zip(self.culprits, keys) if key == first]

    @property
    def verdict(self) -> Culprit | None:
        """The culprit Kafka's answer comes from: the first batch-level one of the failing batch,
        else its first record error (None when the input is clean)."""
        failing = self._verdict_culprits()
        return next((c for c in failing if not _record_error(c)), failing[0] if failing else None)

    def kip467(self) -> tuple[int, list[tuple[int, str]], str | None]:
        """``(error_code, error_records, error_message)`` in one pass over the culprits: what a
        ProduceResponse partition carries (the properties below, each on its own)."""
        failing = self._verdict_culprits()
        if not failing:
            return 0, [], None
        batch_level = next((c for c in failing if not _record_error(c)), None)
        if batch_level is not None:
            return batch_level.code, [], _request_error_message(batch_level, self.config)
        code = 32 if any(c.code == 32 for c in failing) else 87
        seen, records = set(), []
        for c in failing:
            if c.record_index not in seen:
                seen.add(c.record_index)
                records.append((c.record_index, c.message))
        if code == 32:
            return code, records, "One or more records have been rejected due to invalid timestamp"
        first3 = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in records[:3])
        return code, records, (f"One or more records have been rejected due to {len(records)} record errors in "
                               f"total, and only showing the first three errors at most: [{first3}]")

    @property
    def error_code(self) -> int:
        """Error code of the first failing batch, as a ProduceResponse partition carries it."""
        return self.kip467()[0]

    @property
    def error_name(self) -> str:
        return errors.error_name(self.error_code)

    @property
    def error_records(self) -> list[tuple[int, str]]:
        """KIP-467 ``record_errors``: ``(batch_index, message)`` per culprit record of the first
        failing batch; empty when that batch failed as a whole.  (Kafka calls the index of a
        record within its batch ``batch_index``.)"""
        return self.kip467()[1]

    @property
    def error_message(self) -> str | None:
        """KIP-467 ``error_message``: None for batch-level errors, as Kafka sends it."""
        return self.kip467()[2]

    def raise_for_error(self) -> None:
        """Raise the exception Kafka's answer comes from, carrying every culprit."""
        if self.culprits:
            first = self.verdict
            raise errors.error_for(first.code, first.message, first.position, first.rule, self.culprits)


def apply_handler(result: ValidationResult, handler) -> ValidationResult:
    """KIP-210: ask ``handler(culprit)`` about each culprit in order; it answers CONTINUE or
    FAIL.  Fatal culprits never reach it (they fail at once), and after a FAIL it is not asked
    again: ``HandlerFailed`` carries every culprit seen so far.  CONTINUEs are logged at debug
    level, so nothing is swallowed without a trace."""
    import logging
    log = logging.getLogger("pykbatch")
    seen = []
    for c in result.culprits:
        seen.append(c)
        why = errors.ask_handler(handler, c, c.code)
        if why:
            log.error("%s: %r", why, c)
            raise errors.HandlerFailed(c.code, c.message, c.position, c.rule, seen)
        log.debug("handler answered CONTINUE for %r", c)
    return result


_STAGE_RANK = {stage: rank for rank, stage in enumerate(_STAGES)}


def _verdict_key(c: Culprit, config: ValidationConfig) -> tuple[int, int]:
    stage = _RULES_BY_ID[c.rule].stage
    if stage == "framing":  # found while iterating: by ProduceRequest.validateRecords, which reads
        # the first two entries, or else by analyzeAndValidateRecords with its size and CRC checks
        stage = "request" if config.produce_version and c.entry <= 1 else "append"
    return _STAGE_RANK[stage], c.entry


def _request_error_message(c: Culprit, config: ValidationConfig) -> str | None:
    """KIP-467's ``error_message`` for a batch-level verdict.  Kafka sends one only for a fault
    that escapes its produce handler as an error of the whole request: the framing of the first
    entry, which KafkaApis.handleProduceRequest reads before any check (RequestUtils.
    hasTransactionalRecords), comes back through ProduceRequest.getErrorResponse with the
    exception's message.  The same fault further on is found by the checks, which send none."""
    if config.origin == "client" and c.entry == 0 and _RULES_BY_ID[c.rule].stage == "framing":
        return c.message
    return None


def _record_error(c: Culprit) -> bool:
    return c.record_index is not None and _RULES_BY_ID[c.rule].record_error


class DroppedRecord(NamedTuple):
    """A record ``drop_culprits`` removed, with the culprits that condemned it.  Fields it could
    not parse are None; ``raw`` is its bytes (inside the decompressed records of a compressed
    batch).  ``record_index`` None: a whole unrepairable batch (``unrepairable="drop"``)."""
    entry: int
    record_index: int | None
    offset: int | None
    timestamp: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple
    raw: bytes
    culprits: list


class Repair:
    """What ``drop_culprits`` returns; unpacks as ``data, dropped``."""

    __slots__ = ("data", "dropped", "unrepairable")

    def __init__(self, data: bytes, dropped: list, unrepairable: list):
        self.data = data
        self.dropped = dropped
        self.unrepairable = unrepairable
        """(entry, culprits) of batches whose culprits are batch-level."""

    def __iter__(self):
        return iter((self.data, self.dropped))

    def __repr__(self):
        return (f"<Repair {len(self.data)} bytes, {len(self.dropped)} dropped, "
                f"{len(self.unrepairable)} unrepairable batches>")
