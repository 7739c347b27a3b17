"""What validation and culprit dropping return: every culprit (``Culprit``), the result in
KIP-467's shape with Kafka's verdict (``ValidationResult``), an incomplete tail
(``TruncatedTail``), and ``drop_culprits``' ``Repair`` of ``DroppedRecord`` s."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, NamedTuple

from pykbatch import errors
from pykbatch.config import ValidationConfig
from pykbatch.rules import BY_ID as _RULES_BY_ID
from pykbatch import _catalogue
from pykbatch.rules import INDEX as _RULE_INDEX

# Kafka's broker validation metrics (KIP-467) and the rules that feed each.
BROKER_METRICS = {
    "no_key_compacted_topic_records": ("record.compacted_no_key",),
    "invalid_magic_number_records": ("framing.invalid_magic", "legacy.inner_magic"),
    "invalid_message_crc_records": ("batch.crc_mismatch", "legacy.inner_crc_mismatch"),
    "non_increasing_offset_records": ("record.offset_not_increasing",),
}


class TruncatedTail(NamedTuple):
    """An incomplete entry at the end of the buffer: normal for fetch responses
    and live segments, so it is reported apart from the culprits."""
    entry: int
    position: int


class Culprit:
    """One violation: which batch and record broke which rule, and where."""

    __slots__ = ("entry", "record_index", "relative_offset", "code", "rule", "position", "inner_position",
                 "entry_position", "message", "detail", "kafka", "first_offset", "last_offset")

    def __init__(self, entry, record_index, relative_offset, code, rule, position, inner_position,
                 entry_position, message, detail, kafka, first_offset=None, last_offset=None):
        self.entry = entry
        self.first_offset = first_offset
        """The offsets the culprit concerns, None where not known: a record's own offset (both);
        a batch's offsets as its header gives them; for bytes whose framing was lost, the offsets
        between the sound entries around them; for a gap, the missing offsets."""
        self.last_offset = last_offset
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
        if self.first_offset is not None:
            where += f" offset {self.first_offset}" + (
                f"-{self.last_offset}" if self.last_offset not in (None, self.first_offset) else "")
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
    """Where the entry framing was first lost (a size below Kafka's minimum, or an interior size
    running past the end while sound entries follow): the walk resumed at the next sound entry
    (see ``lost_bytes``).  None when the framing held throughout."""
    unwalked_batches: int
    """Compressed batches whose records were not read (only when no decompressor is wired in)."""
    config: ValidationConfig = field(repr=False, default_factory=ValidationConfig)
    counters: dict = field(default_factory=dict)
    """Culprits per rule id, every one counted (past ``max_culprits`` too)."""
    lost_bytes: int = 0
    """Bytes skipped where the framing was lost, up to the next sound entry (each span is a
    culprit of a ``framing.*`` rule whose entry starts where the span does)."""

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

    def as_dict(self) -> dict:
        """The result as JSON-ready data: the verdict (KIP-467's code and name), the counts, an
        incomplete tail, the bytes whose framing was lost and every culprit kept."""
        return {"ok": self.ok, "entries": self.entries, "records": self.records, "culprit_count": self.culprit_count,
                "error_code": self.error_code, "error_name": self.error_name,
                "truncated_tail": self.truncated_tail._asdict() if self.truncated_tail else None,
                "lost_bytes": self.lost_bytes, "culprits": [c.as_dict() for c in self.culprits]}

    @property
    def batches(self) -> int:
        """Entries read as batches (or v0/v1 messages): ``entries`` less the spans whose framing
        was lost, or whose magic is unknown (the culprits of the "framing" stage)."""
        return self.entries - sum(n for rule, n in self.counters.items() if _RULES_BY_ID[rule].stage == "framing")

    def _verdict(self) -> tuple:
        """The core's KIP-467 verdict (csrc/kb_verdict.c): the culprits of the earliest (stage,
        entry), in the order a partition leader runs its checks (pykbatch.rules.STAGES)."""
        if not self.culprits:
            return 0, -1, False, False, []
        return _catalogue.verdict([(_RULE_INDEX[c.rule], c.entry, -1 if c.record_index is None else c.record_index,
                                    c.code) for c in self.culprits],
                                  self.config.origin == "client", self.config.produce_version or 0)

    @property
    def verdict(self) -> Culprit | None:
        """The culprit Kafka's answer comes from: the first batch-level one of the failing batch,
        else its first record error (None when the input is clean)."""
        at = self._verdict()[1]
        return self.culprits[at] if at >= 0 else None

    def kip467(self) -> tuple[int, list[tuple[int, str]], str | None]:
        """``(error_code, error_records, error_message)`` in one pass over the culprits: what a
        ProduceResponse partition carries (the properties below, each on its own)."""
        code, at, batch_level, request_message, firsts = self._verdict()
        if batch_level:
            return code, [], self.culprits[at].message if request_message else None
        if not code:
            return 0, [], None
        records = [(self.culprits[i].record_index, self.culprits[i].message) for i in firsts]
        return code, records, _catalogue.record_errors_message(code, records)

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
        first = self.verdict
        if self.culprits and first is not None:
            raise errors.error_for(first.code, first.message, first.position, first.rule, self.culprits)


class LostSpan(NamedTuple):
    """Bytes of a log a reader skipped because the entry framing was lost there (a size below the
    minimum, an invalid magic, a size that lies): from ``position``, ``size`` bytes up to the next
    sound entry (or the end).  ``entry``: its place in the walk, as culprits number entries;
    ``error``: the fault, a ``KafkaDataError``."""
    entry: int
    position: int
    size: int
    error: Exception


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

    __slots__ = ("data", "dropped", "unrepairable", "unfixed")

    def __init__(self, data: bytes, dropped: list, unrepairable: list, unfixed: Iterable = ()):
        self.data = data
        self.dropped = dropped
        self.unrepairable = unrepairable
        """(entry, culprits) of batches whose culprits are batch-level."""
        self.unfixed = list(unfixed)
        """Culprits no entry was dropped for (``Rule.between``: the order of two entries)."""

    def __iter__(self):
        return iter((self.data, self.dropped))

    def __repr__(self):
        return (f"<Repair {len(self.data)} bytes, {len(self.dropped)} dropped, "
                f"{len(self.unrepairable)} unrepairable batches, {len(self.unfixed)} unfixed>")
