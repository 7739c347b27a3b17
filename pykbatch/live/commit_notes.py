"""What a consumer group's commit says of the ranges its members skipped: the one format of the
commit metadata that names them (rule, range), written by a group's member and read back by the
member that takes the partition over, by ``pykbatch groups describe``, and by Kafka's own
``kafka-consumer-groups --describe --verbose`` users (it is plain JSON).

    {"pykbatch.skipped": [[100, 109, RULE], [250, 250, RULE]], "ranges": 2}   (RULE: the skip's rule id)

``ranges`` counts every range the partition's members named; the list keeps the latest that fit
in Kafka's ``offset.metadata.max.bytes`` (4096 by default: a longer note is refused with
OFFSET_METADATA_TOO_LARGE).  A range at or after the committed offset was skipped and reported
by a member that did not commit past it yet: the next owner skips it again without reporting it
twice.  Metadata of any other form (another client's note) reads as no ranges.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

KEY = "pykbatch.skipped"
MAX_BYTES = 4096  # Kafka's offset.metadata.max.bytes default


@dataclass
class SkipNotes:
    """One partition's named ranges ``(first offset, last offset, rule)``, oldest first, and how
    many its members named in all."""
    ranges: list[tuple[int, int, str]] = field(default_factory=list)
    total: int = 0

    @classmethod
    def parse(cls, metadata: str | None) -> SkipNotes:
        try:
            note = json.loads(metadata or "")
            ranges = [(int(a), int(b), str(r)) for a, b, r in note[KEY]]
            return cls(ranges, max(int(note.get("ranges", len(ranges))), len(ranges)))
        except (ValueError, TypeError, KeyError, AttributeError):
            return cls()

    def add(self, first: int, last: int, rule: str) -> None:
        if (first, last, rule) not in self.ranges:
            self.ranges.append((first, last, rule))
            self.total += 1

    def reported(self, first: int, last: int) -> bool:
        """Whether a member already named a range overlapping ``[first, last]``."""
        return any(a <= last and first <= b for a, b, _ in self.ranges)

    def text(self, max_bytes: int = MAX_BYTES) -> str:
        """The commit metadata ("" with nothing to say), the oldest ranges left out until it fits."""
        if not self.total:
            return ""
        kept = list(self.ranges)
        while True:
            text = json.dumps({KEY: [list(r) for r in kept], "ranges": self.total}, separators=(",", ":"))
            if len(text.encode()) <= max_bytes or not kept:
                return text
            kept = kept[max(1, len(kept) // 8):]
