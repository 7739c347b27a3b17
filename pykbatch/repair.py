"""Repair of a segment file: a new ``.log`` without the culprits, and a dead-letter file holding
everything removed with its error context (KIP-298's dead letters).  The input is never
modified.

Records with culprits are dropped from their batches (``drop_culprits``); batches whose damage is
batch-level (a CRC mismatch, a lying header) are dropped whole; where the entry framing itself is
lost, the bytes up to the next batch whose CRC-32C checks out are dropped as unreadable and the
repair goes on from there.  An incomplete trailing entry is dead-lettered too, so no byte of the
input goes missing without a trace.

The outputs are written to temporary files beside them and renamed into place once complete, so
no crash, signal or full disk leaves a half-written or emptied file; an output that is the input
under another name (a symbolic or hard link) is refused before anything is opened for writing.
"""
from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import os
import tempfile
from dataclasses import dataclass

from pykbatch._native import drop_culprits, iter_batches
from pykbatch.config import ValidationConfig
from pykbatch.errors import classify
from pykbatch.log import Segment
from pykbatch.result import ValidationResult
from pykbatch.rules import BY_ID


@dataclass
class RepairReport:
    kept_batches: int = 0
    empty_batches: int = 0
    """Empty batches in the output that keep the offsets of what was dropped (log data: every
    kept record stays at its offset, as Kafka's cleaner leaves it)."""
    dropped_records: int = 0
    dropped_batches: int = 0
    unreadable_bytes: int = 0
    truncated_tail_bytes: int = 0
    result: ValidationResult | None = None
    """The validation the repair followed: every culprit, so ``result.ok`` says whether anything
    was wrong."""
    unfixed: list = dataclasses.field(default_factory=list)
    """Culprits the repair could not fix and left in place (offsets that go backwards: which entry
    is wrong is not known); the output still has them."""
    closed: list = dataclasses.field(default_factory=list)
    """``ClosingMarker``s: transactions whose marker was lost, closed with an ABORT marker where it
    was, so that Kafka loads the repaired log (``pykbatch.log.lost_markers``)."""


def _b64(data) -> str | None:
    return None if data is None else base64.b64encode(bytes(data)).decode()


def _culprit(c) -> dict:
    d = c.as_dict()
    d.update(error_class=classify(c.code))
    return d


def repair_segment(source, dest: str, dead_letter: str | None = None,
                   config: ValidationConfig | None = None, progress=None) -> RepairReport:
    """Writes ``dest``: the segment at ``source`` without its culprits (``drop_culprits`` with
    ``unrepairable="drop"``, the one repair every surface gives), and ``dead_letter`` (JSON
    lines) with everything removed.  ``progress``: called with the byte position the
    validation reached, now and then."""
    config = dataclasses.replace(config or ValidationConfig(origin="log"), max_culprits=2**31 - 1)
    report = RepairReport()
    with _segment(source) as seg:
        refuse_input_as_output(seg.path, dest, dead_letter)
        with _replaced(dest, "wb") as out, \
                (_replaced(dead_letter, "w") if dead_letter else contextlib.nullcontext()) as letters:
            _repair_into(seg, out, letters, config, report, progress)
    return report


class InputAsOutputError(ValueError):
    """An output of the repair is its input (by name, or under another: a symbolic or hard link)."""


def refuse_input_as_output(source: str | None, dest: str, dead_letter: str | None = None) -> None:
    """Raises ``InputAsOutputError`` when ``dest`` or ``dead_letter`` is the file at ``source``
    (None: a stream, nothing to compare), before anything is opened for writing."""
    if source is None:
        return
    for what, path in (("--out", dest), ("--dead-letter", dead_letter)):
        if path is None:
            continue
        same_name = os.path.abspath(path) == os.path.abspath(source)
        if same_name or _same_file(source, path):
            raise InputAsOutputError(f"repair never writes over its input: {path} is {source}"
                                     f"{'' if same_name else ' under another name'}; give another {what}")


def _same_file(a, b) -> bool:
    """Whether paths ``a`` and ``b`` name one file (links resolved; False when either is missing)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


@contextlib.contextmanager
def _replaced(path, mode: str):
    """A file written beside ``path`` and renamed onto it when the block ends without an error
    (removed when it raises): ``path`` is never half-written, nor emptied before its time."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def _repair_into(seg, out, letters, config: ValidationConfig, report: RepairReport, progress) -> None:
    """The repair of ``seg`` into ``out`` and ``letters`` (open files), counted in ``report``."""
    data = seg.view()
    src = seg.path or "(stream)"
    result = report.result = seg.validate(config, progress=progress)
    fixed = drop_culprits(data, result, unrepairable="drop")
    repaired = fixed.data
    if seg.path is not None:
        repaired, report.closed = _close_lost_transactions(seg, repaired)
    out.write(repaired)
    report.unfixed = fixed.unfixed
    ours = {m.offset for m in report.closed}
    for b in iter_batches(repaired, verify_crc=False):
        if b.is_control and b.producer_id >= 0 and b.base_offset in ours:
            continue  # a marker of the repair's own, counted in ``closed``
        if b.magic == 2 and b.record_count == 0:
            report.empty_batches += 1
        else:
            report.kept_batches += 1
    lost = {c.entry for c in result.culprits if BY_ID[c.rule].stage == "framing"}
    for d in fixed.dropped:
        if d.entry in lost:  # the framing was lost here: the bytes up to the next sound entry
            position = d.culprits[0].entry_position
            report.unreadable_bytes += len(d.raw)
            _raw_letter(letters, src, "unreadable", position, d.raw, [_culprit(c) for c in d.culprits],
                        entry=d.entry)
            continue
        if d.record_index is None:
            report.dropped_batches += 1
        else:
            report.dropped_records += 1
        _letter(letters, src, d)
    if result.truncated_tail is not None:
        end = result.valid_bytes
        report.truncated_tail_bytes = len(data) - end
        _raw_letter(letters, src, "truncated_tail", end, data[end:], [])
    del data


def _close_lost_transactions(seg, repaired: bytes) -> tuple[bytes, list]:
    """``repaired`` with the markers ``pykbatch.log.lost_markers`` finds it needs, each where its
    transaction's marker was lost: at the start of an empty batch the repair left in place of
    what it dropped (the batch keeps the rest of its offsets), or after the segment's last batch."""
    from pykbatch.kafka.control import end_txn_marker
    from pykbatch.log.lost_markers import closing_markers
    made = _fillers(iter_batches(repaired, verify_crc=False))
    if made:  # those the input had already are not the repair's
        made -= _fillers(seg.batches(on_lost=lambda span: None))
    markers = closing_markers(seg.path, repaired, sorted(made))
    if not markers:
        return repaired, []
    at = {m.offset: end_txn_marker(m.producer_id, m.producer_epoch, False, m.coordinator_epoch, m.offset,
                                   m.timestamp) for m in markers}
    out = bytearray()
    for b in iter_batches(repaired, verify_crc=False):
        raw = repaired[b.position:b.position + b.size]
        if (b.base_offset, b.last_offset) in made:
            first = b.base_offset
            while first in at and first <= b.last_offset:
                out += at.pop(first)
                first += 1
            if first <= b.last_offset:
                out += _rebased_empty(raw, first, b.last_offset)
            continue
        out += raw
    for offset in sorted(at):  # after the segment's end
        out += at[offset]
    return bytes(out), markers


def _fillers(batches) -> set:
    """(first, last) offsets of the empty batches without a producer among ``batches``: what the
    repair puts where it dropped whole entries (the cleaner's empty batches keep their producer)."""
    return {(b.base_offset, b.last_offset) for b in batches
            if b.magic == 2 and b.record_count == 0 and b.producer_id < 0 and not b.is_control}


def _rebased_empty(raw: bytes, base_offset: int, last_offset: int) -> bytes:
    """An empty v2 batch moved to start at ``base_offset`` (its CRC recomputed)."""
    from pykbatch._native import crc32c
    b = bytearray(raw)
    b[0:8] = base_offset.to_bytes(8, "big", signed=True)
    b[23:27] = (last_offset - base_offset).to_bytes(4, "big", signed=True)
    b[17:21] = crc32c(bytes(b[21:])).to_bytes(4, "big")
    return bytes(b)


def _segment(source):
    """``source`` as a segment: a path or file-like opened (and closed after), or a ``Segment``
    the caller opened (left open)."""
    return contextlib.nullcontext(source) if isinstance(source, Segment) else Segment(source)


def _letter(letters, src: str, d) -> None:
    if letters is None:
        return
    kind = "batch" if d.record_index is None else "record"
    letters.write(json.dumps({
        "kind": kind, "source": src, "entry": d.entry, "record_index": d.record_index, "offset": d.offset,
        "timestamp": d.timestamp, "key": _b64(d.key), "value": _b64(d.value),
        "headers": [[k, _b64(v)] for k, v in d.headers], "raw": _b64(d.raw),
        "culprits": [_culprit(c) for c in d.culprits]}) + "\n")


def _raw_letter(letters, src: str, kind: str, position: int, raw, culprits: list, entry: int | None = None) -> None:
    if letters is None:
        return
    letters.write(json.dumps({"kind": kind, "source": src, "entry": entry, "position": position, "length": len(raw),
                              "raw": _b64(raw), "culprits": culprits}) + "\n")
