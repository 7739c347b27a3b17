"""What checks of indexes against their logs found (``OffsetIndex.check`` / ``TimeIndex.check``),
worded and ordered as ``kafka-dump-log`` reports it after a run: the audit lists these lines, the
dump prints the report on stderr."""
from __future__ import annotations

import os
from typing import TextIO

from pykbatch.log.indexes import OffsetIndex


class IndexReport:
    """Offset-index mismatches, time-index mismatches, out-of-order timestamps, indexed offsets
    missing from the log, and the non-consecutive offsets deep iteration met (these are not
    problems: compaction makes them).  ``mismatches_descending``: offset-index mismatches by index
    offset, highest first, once each (Kafka 4.3+'s tool); ``gaps_from_minus_one``: non-consecutive
    offsets in offset order (4.3+), else most recent first."""

    def __init__(self, mismatches_descending: bool = True, gaps_from_minus_one: bool = True):
        self.mismatches_descending = mismatches_descending
        self.gaps_from_minus_one = gaps_from_minus_one
        self.index_mismatches: dict[str, list] = {}
        self.time_mismatches: dict[str, list] = {}
        self.out_of_order: dict[str, list] = {}
        self.not_found: dict[str, list] = {}
        self.non_consecutive: dict[str, list] = {}

    def add(self, path: str, problems) -> None:
        """Problems an index check found in the file at ``path`` (``OffsetIndex.check`` /
        ``TimeIndex.check``), filed where the report prints them."""
        where = {"mismatch": self.index_mismatches if path.endswith(OffsetIndex.SUFFIX) else self.time_mismatches,
                 "not_found": self.not_found, "out_of_order": self.out_of_order}
        for kind, pair in problems:
            where[kind].setdefault(os.path.abspath(path), []).append(pair)

    @property
    def count(self) -> int:
        return sum(len(v) for d in (self.index_mismatches, self.time_mismatches, self.out_of_order,
                                    self.not_found) for v in d.values())

    def _report(self):
        """(line, is a problem's own line) of the report, in the tool's order."""
        for path, pairs in self.index_mismatches.items():
            yield f"Mismatches in :{path}", False
            if self.mismatches_descending:
                pairs = sorted(dict(pairs).items(), reverse=True)
            for index_offset, log_offset in pairs:
                yield f"  Index offset: {index_offset}, log offset: {log_offset}", True
        for path, pairs in self.time_mismatches.items():
            yield f"Found timestamp mismatch in :{path}", False
            for index_ts, log_ts in pairs:
                yield f"  Index timestamp: {index_ts}, log timestamp: {log_ts}", True
        for path, pairs in self.out_of_order.items():
            yield f"Found out of order timestamp in :{path}", False
            for index_ts, prev in pairs:
                yield f"  Index timestamp: {index_ts}, Previously indexed timestamp: {prev}", True
        for pairs in self.not_found.values():
            yield "The following indexed offsets are not found in the log.", False
            for indexed, found in pairs:
                yield f"Indexed offset: {indexed}, found log offset: {found}", True
        for path, pairs in self.non_consecutive.items():
            yield f"Non-consecutive offsets in {path}", False
            pairs = sorted(dict(pairs).items()) if self.gaps_from_minus_one else reversed(pairs)
            for a, b in pairs:
                yield f"  {a} is followed by {b}", True

    def write(self, err: TextIO) -> None:
        for line, _ in self._report():
            err.write(line + "\n")

    def lines(self) -> list[str]:
        """One line per problem, without the report's headings."""
        return [line.strip() for line, own in self._report() if own]
