"""The rules pykbatch checks, as Python sees them: ``RULES`` (indexed by the core's rule value),
``BY_ID``, and the rendering of a fault into Kafka's message.

Every rule, its Kafka code, stage and messages are written once, in ``csrc/kb_rules.def`` (see
there for the template fields); this module reads that table through ``pykbatch._catalogue``.
"""
from __future__ import annotations

import functools

from dataclasses import dataclass

from pykbatch import _catalogue


@dataclass(frozen=True)
class Rule:
    id: str
    """Stable name, e.g. ``"batch.crc_mismatch"``."""
    code: int
    """Kafka's error code for it."""
    stage: str
    """When Kafka's broker runs the check (see STAGES): decides which culprit gives the verdict."""
    kafka: bool
    """True when Apache Kafka rejects the condition too; False for pykbatch's stricter checks."""
    record_error: bool
    """True when reported as a per-record error (KIP-467 ``error_records``); False when
    the whole batch fails, as Kafka's broker does for every structural error."""
    template: str
    detail: str
    """Extra explanation appended by pykbatch (Kafka's own message stays as is)."""
    reader_template: str
    """Kafka's client-side message for the same fault, when it differs from the broker's
    (``iter_batches`` raises with it)."""
    between: bool = False
    """A fault of two entries' order (reported against the later), not of either's bytes: a
    repair drops neither, and says so."""

    @property
    def record(self) -> bool:
        """The template prints a legacy record as Kafka's LegacyRecordBatch.toString does."""
        return "{record}" in self.template

    @property
    def names_field(self) -> bool:
        """The fault's first value is the record field it was found in (``{field}``)."""
        return "{field}" in self.template or "{field}" in self.detail

    def message(self, **values) -> str:
        """The message of a rule checked in Python, from its named fields."""
        return self.template.format(**values)


# The order in which a partition leader checks one append (KafkaApis, ReplicaManager,
# UnifiedLog.analyzeAndValidateRecords, LogValidator): each stage runs over every batch before
# the next begins; "batch" runs per batch (header, then its records).
# Kafka answers with the first failure, so the verdict comes from the earliest (stage, entry).
# A rule of stage "framing" is found while iterating entries: "request" or "append", by entry.
# "handler": ReplicaManager.handleProduceAppend, between the request's checks and the log's append;
# "rebuild": LogValidator re-encoding a batch after every record of it passed.
STAGES = _catalogue.stages()

RULES: tuple[Rule, ...] = tuple(Rule(*fields) for fields in _catalogue.rules())
BY_ID = {rule.id: rule for rule in RULES}
INDEX = {rule.id: i for i, rule in enumerate(RULES)}
"""A rule's value in the C core."""

_STAGE_NAMES = frozenset(STAGES) | {"framing"}
_unknown = [r.id for r in RULES if r.stage not in _STAGE_NAMES]
if _unknown:
    raise ImportError(f"pykbatch: rules {_unknown} name a stage outside {sorted(_STAGE_NAMES)}")

FIELDS = _catalogue.record_fields()


def render(rule: Rule, args, tp: str, reader: bool = False) -> tuple[str, str]:
    """Kafka-style message and pykbatch's detail for one fault (args: the core's values, up to 8),
    filled by the core (csrc/kb_render.c) as every host fills them; ``reader``: the message
    Kafka's client-side reader gives, where it has its own."""
    index = INDEX[rule.id]
    message = _catalogue.render_text(index, args, tp, _catalogue.TEXT_READER if reader else _catalogue.TEXT_MESSAGE)
    detail = _catalogue.render_text(index, args, tp, _catalogue.TEXT_DETAIL) if rule.detail else ""
    if message is None or detail is None:
        raise ValueError(f"rule {rule.id}: its text names fields the core does not fill (a rule checked in Python "
                         "fills its own: Rule.message)")
    return message, detail


@functools.lru_cache(maxsize=1)
def _per_record_patterns() -> tuple:
    """A regular expression for each of Kafka's per-record messages (KIP-467 ``error_records``):
    the template's words literal, its fields any text."""
    import re
    out = []
    for rule in RULES:
        if not (rule.kafka and rule.record_error and rule.template):
            continue
        parts = re.split(r"\{[a-z_0-9]+\}", rule.template)
        out.append((re.compile("^" + "(.*?)".join(re.escape(p) for p in parts) + "$", re.S), rule))
    return tuple(out)


def rule_of_message(message: str) -> Rule | None:
    """The catalogue rule whose Kafka message ``message`` is (a broker's per-record error text,
    which names the record's own fault under the batch's one error code), or None."""
    for pattern, rule in _per_record_patterns():
        if pattern.match(message or ""):
            return rule
    return None
