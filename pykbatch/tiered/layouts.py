"""How a remote store lays out a partition's uploaded segments: one small interface per store.

A *layout* answers three questions over an fsspec filesystem (local disk, s3://, gs://...):
which partitions the store holds, which uploaded copies (``RemoteObject``: the files of one
upload, keyed by Kafka's suffixes) each partition has, and how to open a file (ranged reads on
object stores).  A store plugs in by subclassing ``Layout`` and adding itself to ``LAYOUTS``.

``LocalTieredStorage`` is Apache Kafka's own file-system store (its integration tests' RSM,
``org.apache.kafka.server.log.remote.storage.LocalTieredStorage``), as a broker writes it:

    <root>/<topic>-<partition>-<topicId>/<20-digit start offset>-<segment uuid>.<suffix>

with suffixes ``.log .index .timeindex .txnindex .snapshot .leader_epoch_checkpoint`` (topic id
and segment uuid in Kafka's 22-character form).  Aiven's store (``<prefix>/<topic>-<topicId>/
<partition>/<offset>-<uuid>.{log,indexes,rsm-manifest}``, chunked, optionally compressed and
encrypted) is not implemented: no fixture its real plugin wrote could be had here.
"""
from __future__ import annotations

import abc
import re
import uuid
from dataclasses import dataclass, field

from pykbatch.log import files, indexes
from pykbatch.kafka.definitions import parse_kafka_uuid
from pykbatch.retry import retry_io

from pykbatch.tiered.metadata import TopicIdPartition

# an upload's files carry the local segment's suffixes (pykbatch.log), plus the leader-epoch
# checkpoint's, which RemoteStorageManager gives a suffix of its own
LOG = files.LOG
INDEX = indexes.OffsetIndex.SUFFIX
TIME_INDEX = indexes.TimeIndex.SUFFIX
TXN_INDEX = indexes.TxnIndex.SUFFIX
SNAPSHOT = indexes.ProducerSnapshot.SUFFIX
EPOCHS = ".leader_epoch_checkpoint"


def storage_options(items) -> dict:
    """(key, value) pairs as fsspec storage options: dotted keys nest
    (``client_kwargs.endpoint_url``), true/false and integers are converted.  A command's
    ``--storage-option KEY=VALUE`` and a Spark read's ``fs.<key>`` options are both read so."""
    out: dict = {}
    for key, value in items:
        parsed: object = {"true": True, "false": False}.get(str(value).lower(), value)
        if isinstance(parsed, str) and parsed.lstrip("-").isdigit():
            parsed = int(parsed)
        node = out
        *parents, last = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = parsed
    return out


@dataclass(frozen=True)
class RemoteObject:
    """The files of one upload of one segment."""
    partition: TopicIdPartition
    start_offset: int
    segment_uuid: uuid.UUID
    files: dict[str, str] = field(hash=False)  # suffix -> path in the store
    sizes: dict[str, int] = field(hash=False)  # suffix -> bytes

    @property
    def log(self) -> str | None:
        return self.files.get(LOG)


class Layout(abc.ABC):
    HOME: str | None = None
    """The folder the layout keeps under the directory a broker is given, if it has one."""

    """A remote store's layout.  ``fs`` is an fsspec filesystem, ``root`` a path in it; a store
    plugs in by implementing the three abstract methods."""
    name = "?"

    def __init__(self, fs, root: str):
        self.fs, self.root = fs, root.rstrip("/")

    @classmethod
    @abc.abstractmethod
    def detect(cls, fs, root: str) -> bool:
        """Whether ``root`` looks like this layout."""

    @abc.abstractmethod
    def partitions(self) -> dict[TopicIdPartition, str]:
        """Each partition the store holds -> its location."""

    @abc.abstractmethod
    def objects(self, partition: TopicIdPartition) -> list[RemoteObject]:
        """Every upload the store holds for ``partition`` (whatever the metadata says of it)."""

    def open(self, path: str, block_size: int | None = None, exact: bool = False):
        """A seekable binary file; on an object store, reads become ranged requests (``exact``:
        of exactly the bytes asked for, no read-ahead: the caller reads the ranges it needs)."""
        kwargs = {}
        if block_size is not None and "block_size" in _open_kwargs(self.fs):
            kwargs["block_size"] = block_size
        if exact and self.local_path(path) is None:
            kwargs["cache_type"] = "none"
        return retry_io(lambda: self.fs.open(path, "rb", **kwargs))

    def read(self, path: str, start: int = 0, end: int | None = None) -> bytes:
        """Bytes [start, end) of a file: one ranged request on an object store (no read-ahead,
        no metadata request first)."""
        if end is not None and end <= start:
            return b""
        return retry_io(lambda: self.fs.cat_file(path, start=start or None, end=end))

    def local_path(self, path: str) -> str | None:
        """The path on this machine's disk, when the store is local (read through mmap)."""
        protocol = self.fs.protocol if isinstance(self.fs.protocol, str) else self.fs.protocol[0]
        return path if protocol in ("file", "local") else None

    def describe(self) -> str:
        return f"{self.name} at {self.fs.unstrip_protocol(self.root)}"


def _open_kwargs(fs) -> tuple:
    import inspect
    try:
        return tuple(inspect.signature(fs._open).parameters)
    except (TypeError, ValueError, AttributeError):
        return ()


_TP_DIR = re.compile(r"^(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>\d+)-(?P<id>[a-zA-Z0-9_-]{22})$")
_FILE = re.compile(r"^(?P<offset>\d+)-(?P<uuid>[a-zA-Z0-9_-]{22})(?P<suffix>\.[a-z_]+)$")


class LocalTieredStorage(Layout):
    name = "local-tiered-storage"
    FOLDER = _TP_DIR  # a partition's folder: how the store is detected (here and by the JVM's reader)
    HOME = "kafka-tiered-storage"  # the folder it keeps under the rsm.config.dir a broker is given

    @classmethod
    def detect(cls, fs, root: str) -> bool:
        return any(_TP_DIR.match(_name(p)) for p in _dirs(fs, root))

    def partitions(self) -> dict[TopicIdPartition, str]:
        out = {}
        for path in _dirs(self.fs, self.root):
            m = _TP_DIR.match(_name(path))
            if m:
                out[TopicIdPartition(m["topic"], int(m["partition"]), parse_kafka_uuid(m["id"]))] = path
        return out

    def objects(self, partition: TopicIdPartition) -> list[RemoteObject]:
        location = self.partitions().get(partition)
        if location is None:
            return []
        uploads: dict[uuid.UUID, tuple[int, dict, dict]] = {}
        for info in retry_io(lambda: self.fs.ls(location, detail=True)):
            m = _FILE.match(_name(info["name"]))
            if not m or info.get("type") == "directory":
                continue
            seg = parse_kafka_uuid(m["uuid"])
            _, files, sizes = uploads.setdefault(seg, (int(m["offset"]), {}, {}))
            files[m["suffix"]] = info["name"]
            sizes[m["suffix"]] = int(info.get("size") or 0)
        return sorted((RemoteObject(partition, start, seg, files, sizes) for seg, (start, files, sizes) in uploads.items()),
                      key=lambda o: (o.start_offset, str(o.segment_uuid)))


def _name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def _dirs(fs, root: str) -> list[str]:
    try:
        return [i["name"] for i in fs.ls(root, detail=True) if i.get("type") == "directory"]
    except FileNotFoundError:
        return []


LAYOUTS: dict[str, type[Layout]] = {LocalTieredStorage.name: LocalTieredStorage}


def find_layout(fs, root: str, any_folder: bool = False) -> Layout | None:
    """The store whose layout is detected at ``root`` or in the folder a layout keeps under it (the
    ``rsm.config.dir`` a broker is given holds LocalTieredStorage's ``kafka-tiered-storage/``), or
    None.  ``any_folder``: in any folder right under ``root`` (a store named where it is opened);
    without it only that one is looked into -- whether a read is of a store at all is asked of
    broker log directories too, whose thousands of partitions are not listed one by one."""
    children = {_name(d): d for d in _dirs(fs, root)}
    for cls in LAYOUTS.values():
        for where in [root] + (list(children.values()) if any_folder else [children.get(cls.HOME)]):
            if where is not None and cls.detect(fs, where):
                return cls(fs, where)
    return None


def open_store(url: str, layout: str | None = None, **storage_options) -> Layout:
    """The remote store at ``url`` (a local path, ``file://``, ``s3://bucket/prefix`` ...), its
    layout named or detected.  A store's own folder is found one level down too: the
    ``rsm.config.dir`` a broker is given holds LocalTieredStorage's ``kafka-tiered-storage/``."""
    try:
        import fsspec
    except ImportError:
        raise ImportError("reading a remote store needs fsspec: pip install 'pykbatch[remote]' (local disk), or "
                          "'pykbatch[s3]' for s3://") from None
    fs, root = fsspec.core.url_to_fs(url, **storage_options)
    if layout is not None:
        if layout not in LAYOUTS:
            raise ValueError(f"unknown remote store layout {layout!r}; known: {', '.join(LAYOUTS)}")
        return LAYOUTS[layout](fs, root)
    found = find_layout(fs, root, any_folder=True)
    if found is not None:
        return found
    raise ValueError(f"{url}: no known remote store layout found, there or one folder down (known: "
                     f"{', '.join(LAYOUTS)}; LocalTieredStorage keeps <topic>-<partition>-<topicId> folders in "
                     f"kafka-tiered-storage/ under rsm.config.dir)")
