"""The names of a partition directory's files (Kafka's LogFileUtils), each rule once.

A segment's files share its base offset, written as at least 20 zero-padded digits, and differ by
suffix: ``00000000000000001000.log`` and its ``.index``, ``.timeindex``, ``.txnindex``; producer
snapshots are ``<offset>.snapshot``; KRaft snapshots ``<offset>-<epoch>.checkpoint``.  The index
and state readers (``pykbatch.log.indexes``) declare their own suffix.
"""
from __future__ import annotations

import os
import re

LOG = ".log"
KRAFT_SNAPSHOT = ".checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
STDIN = "-"  # where the commands expect a file: standard input (a log)


SNIFF_BYTES = 1 << 20  # what is read of a file whose name does not say what it holds


def head_of(path: str) -> bytes | None:
    """The first ``SNIFF_BYTES`` of the file (None when it cannot be read): enough to tell what a
    file without a telling name holds."""
    try:
        with open(path, "rb") as f:
            return f.read(SNIFF_BYTES)
    except OSError:
        return None


def named_as_log(path: str) -> bool:
    """Whether the name says the batches come from a log (a ``.log`` segment, or standard input):
    a log's checks apply (its offsets increase); any other file holds a producer's batches unless
    the user says otherwise (``--origin``)."""
    return path == STDIN or path.endswith(LOG)


def base_offset_of(path: str) -> int:
    """The base offset in a segment file's name (``00000000000000001000.index`` -> 1000)."""
    stem = os.path.basename(path).split(".")[0].split("-")[0]
    if not stem.isdigit():
        raise ValueError(f"{path}: not a segment file name (20 digits, then a suffix)")
    return int(stem)


def segment_file_name(base_offset: int, suffix: str) -> str:
    """Kafka's file name for a segment's file: at least 20 digits, zero-padded."""
    return f"{base_offset:020d}{suffix}"


def is_segment_file(name: str, suffix: str = LOG) -> bool:
    """Whether a file name is a segment's file with this suffix (digits, then the suffix)."""
    return name.endswith(suffix) and name[:-len(suffix)].isdigit()


def suffix_of(path: str) -> str:
    """The file name's last suffix, dot included ("" when it has none)."""
    name = os.path.basename(path.rstrip("/"))
    return "." + name.rsplit(".", 1)[1] if "." in name else ""


def sibling(path: str, suffix: str) -> str:
    """The path of the same segment's file with another suffix (a local path or a URL)."""
    head, _, name = path.rpartition("/") if "/" in path else ("", "", path)
    stem = os.path.basename(name).split(".")[0]
    return f"{head}/{stem}{suffix}" if head or path.startswith("/") else stem + suffix


_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


def topic_partition_of(dirname: str) -> tuple[str, int] | None:
    """(topic, partition) of a partition directory's name ``<topic>-<partition>``, or None."""
    m = _PARTITION_DIR.match(os.path.basename(os.path.normpath(dirname)) if dirname else "")
    return (m["topic"], int(m["partition"])) if m else None
