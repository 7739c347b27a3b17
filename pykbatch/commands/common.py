"""What every command shares: the exit statuses, the usage error, argument types and the way
findings are printed."""
from __future__ import annotations

import argparse

from pykbatch.log.files import LOG, STDIN, named_as_log

OK, DAMAGED, CANNOT_RUN = 0, 1, 2
EXIT_CODES = {
    OK: "nothing wrong found",
    DAMAGED: "damage found in the data (culprits, damaged batches, index mismatches); what was "
             "readable was still printed",
    CANNOT_RUN: "the command could not run: bad arguments, an input that cannot be opened, or an "
                "output that cannot be written",
}


class UsageError(Exception):
    """A command given what it cannot work with (exit status 2, as argparse's own errors)."""


class Verdict:
    """The exit status a command has reached so far (``args.verdict``, set up by ``main``).  A
    command says what it found the moment it knows, before it prints it: when the reader goes
    away (``| head``) the command stops there and exits with what it had found by then, so a
    closed pipe silences the report, never the damage."""

    __slots__ = ("status",)

    def __init__(self) -> None:
        self.status = OK

    def found(self, damage=1):
        """Damage found (any true count); returns ``damage``, so counts pass through."""
        if damage:
            self.status = max(self.status, DAMAGED)
        return damage

    def end(self, status: int) -> int:
        """The command's own status, never milder than what was found on the way."""
        return max(status, self.status)


def output_path(path: str, flag: str) -> str:
    """An output file's name, checked before any work: not standard output (``-``: a file is
    written, renamed into place), in a folder that exists."""
    import os
    if path == "-":
        raise UsageError(f"{flag} - : this output is a file (written beside its name, then renamed into place); "
                         "give a path")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"{flag} {path}: {'no such directory' if not os.path.exists(folder) else 'not a directory'} "
                         f"{os.path.dirname(path) or folder}")
    return path


def threads(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"--jobs takes a number of threads, at least 1, not {text}")
    return n


def at_least_one(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"takes a number, at least 1, not {text}")
    return n


def progress_enabled(args) -> bool:
    """Whether a progress line may be shown (on a terminal, for large work) for this command."""
    return not getattr(args, "no_progress", False)


def origin_of(path: str) -> str:
    """The checks a file gets unless --origin says: a log's for a segment (or standard input), and
    for any file whose batches say they come from a log -- two in a row whose offsets meet, which
    a producer's never do (each starts at 0), and a damaged byte will not fake -- so the same bytes
    get the same verdict whatever their name; a producer's for the rest (a produce request's
    records, a sample)."""
    if named_as_log(path):
        return "log"
    from pykbatch import _native
    from pykbatch.log.files import head_of
    try:
        head = head_of(path) or b""
        before = None
        for b in _native.iter_batches(head, verify_crc=False, strict=False):
            if b.magic != 2:
                break
            if before is not None and before.last_offset >= before.base_offset and \
                    b.base_offset == before.last_offset + 1:
                return "log"
            before = b
    except ValueError:  # damaged here: the checks say so, as a producer's
        pass
    return "client"


def topic_partition(given: str | None, folder: str | None) -> str:
    """The partition Kafka's messages and the dead letters name: --topic-partition, else the one
    the folder is named for (``orders-0``), else the placeholder ``t-0``."""
    if given:
        return given
    import os
    from pykbatch.log.files import topic_partition_of
    named = topic_partition_of(os.path.abspath(folder)) if folder else None
    return f"{named[0]}-{named[1]}" if named else "t-0"


def compacted_for(args, folder: str | None, say: bool = True) -> bool:
    """--compacted, else what the files beside the partition in ``folder`` say of its topic
    (``pykbatch.log.cleanup_policy``: the KRaft metadata log, Kafka's internal topics), said on
    standard error when it makes the topic compacted (``say``: the dump's standard error stays
    Kafka's tool's)."""
    if args.compacted or folder is None:
        return bool(args.compacted)
    import os
    import sys
    from pykbatch.log.cleanup_policy import cleanup_policy
    policy = cleanup_policy(folder)
    if policy is None or not policy.compacted:
        return False
    said = getattr(args, "_compaction_said", set())
    if say and folder not in said:  # once per partition
        print(f"note: {os.path.basename(os.path.normpath(folder))} is read as compacted (as --compacted): "
              f"{policy.source}", file=sys.stderr)
        args._compaction_said = said | {folder}
    return True


def folder_of(path: str) -> str | None:
    """The folder a file lies in (None for standard input)."""
    import os
    return None if path == STDIN else os.path.dirname(os.path.abspath(path))


def not_a_log(path: str, result, size: int) -> bool:
    """Nothing in a file not named as a log reads as an entry (all of it lost, or too short for one
    entry's header): it is some other kind of file."""
    if size == 0 or path.endswith(LOG):
        return False
    all_lost = result.stopped_at == 0 and result.lost_bytes == size
    tail = result.truncated_tail
    return all_lost or (result.batches == 0 and tail is not None and tail.position == 0)


def print_capped(lines, cap: int, what: str, indent: str = "  ") -> None:
    """Per-finding lines, at most ``cap`` of them, then how many more were left out."""
    lines = list(lines)
    for line in lines[:cap]:
        print(f"{indent}{line}")
    if len(lines) > cap:
        print(f"{indent}... {len(lines) - cap} more {what} not shown (--max-culprits)")


def offsets_text(first: int | None, last: int | None) -> str:
    """The offsets a finding concerns, as printed: "offset 7", "offsets 7-12", "offsets from 7"."""
    if first is None:
        return ""
    if last is None:
        return f"offsets from {first}"
    return f"offset {first}" if first == last else f"offsets {first}-{last}"


def culprit_line(c) -> str:
    """One culprit as every command prints it: where (batch, record, offset delta, offsets, byte),
    then Kafka's code, the rule and the message."""
    rec = f" record {c.record_index}" if c.record_index is not None else ""
    delta = f" offset delta {c.relative_offset}" if c.relative_offset is not None and c.record_index is not None else ""
    offsets = offsets_text(c.first_offset, c.last_offset)
    where = ", ".join(part for part in (delta.strip(), offsets) if part)
    detail = f" ({c.detail})" if c.detail else ""
    return (f"batch {c.entry}{rec}{f' ({where})' if where else ''} at byte {c.position}: {c.name}({c.code}) "
            f"{c.rule}: {c.message}{detail}")


def add_strict(parser) -> None:
    """``--strict``, as every command that reads segments takes it: an incomplete tail is damage
    even where it may be the active segment's."""
    parser.add_argument("--strict", action="store_true",
                        help="a .log file that ends inside an entry is damage (exit 1) even with no later segment "
                             "beside it, where it may be the partition's active one (with one, it always is)")


def tail_culprit(path: str, result, size: int):
    """A file given alone that ends inside an entry (``result.truncated_tail``): its culprit as
    the partition's verdict has it (``pykbatch.log.truth.segment_tail``: ``log.segment_truncated``
    when a later segment beside it shows it closed, else ``log.tail_incomplete``, damage only
    under --strict), or None."""
    t = result.truncated_tail
    if t is None:
        return None
    from pykbatch.log.truth import incomplete_tail, segment_tail
    if path == STDIN:  # read once, and no partition around it
        return incomplete_tail(t.entry, t.position, size - t.position)
    return segment_tail(path, strict=True)


_TAIL_WORDS = {
    None: "damage unless this is the partition's active (last) segment",
    "active": "the active segment's, where the broker was writing (not an error)",
    "closed": "a closed segment's: its last entries are lost (log.segment_truncated)",
}


def print_result(path: str, result, tail=None, segment: str | None = None) -> None:
    """A file's result: the counts and verdict, every culprit kept, the bytes whose framing was
    lost and how it ends (``tail``: the file was given alone, its ``log.tail_incomplete``;
    ``segment``: "active" or "closed" where the partition says which it is)."""
    status = "ok" if result.ok else f"{result.culprit_count} culprit(s)"
    cut = (tail is not None and tail.rule == "log.segment_truncated") or (
        segment == "closed" and result.truncated_tail is not None)
    if cut:
        status += ", and its last entries are lost"
    elif tail is not None:
        status += " up to an incomplete entry at its end"
    print(f"{path}: {result.batches} batches, {result.records} records, {status}")
    for c in result.culprits:
        print(f"  {culprit_line(c)}")
    if result.culprit_count > len(result.culprits):
        print(f"  ... {result.culprit_count - len(result.culprits)} more not shown (--max-culprits)")
    if result.lost_bytes:
        print(f"  {result.lost_bytes} unreadable byte(s) skipped where the framing was lost; the batches after "
              "them were read")
    if tail is not None:
        print(f"  {culprit_line(tail)}")
    elif result.truncated_tail:
        t = result.truncated_tail
        print(f"  incomplete trailing entry {t.entry} at byte {t.position}: {_TAIL_WORDS[segment]}")
    if result.unwalked_batches:
        print(f"  note: records of {result.unwalked_batches} compressed batch(es) were not checked")


def read_properties(path: str) -> dict:
    """A Java properties file's ``key=value`` lines (``#`` and ``!`` comments), as Kafka's tools read
    ``--consumer.config``; a file that cannot be read is a UsageError naming it."""
    props: dict = {}
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith(("#", "!")):
                    key, _, value = line.partition("=")
                    props[key.strip()] = value.strip()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    return props


def key_values(items: list[str], flag: str) -> dict:
    """``flag KEY=VALUE`` items as a mapping (the last of a key wins)."""
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq:
            raise UsageError(f"{flag} takes KEY=VALUE, not {item!r}")
        out[key.strip()] = value
    return out


def client_properties(config_file: str | None, items: list[str], bootstrap: str, flag: str) -> dict:
    """Kafka client properties for a live command: a properties file (``key=value`` lines, as
    Kafka's console tools read ``--consumer.config`` / ``--producer.config``: secrets stay off the
    command line), then ``flag KEY=VALUE`` items, then the bootstrap server."""
    props = read_properties(config_file) if config_file else {}
    props.update(key_values(items, flag))
    props["bootstrap.servers"] = bootstrap
    return props
