"""Whether a partition's topic is compacted, as the files beside it say -- so that offsets the log
cleaner removed are not named as lost, and offsets lost on a topic nobody compacts are.

* A KRaft broker keeps every topic's configuration in its metadata log, ``__cluster_metadata-0``
  in one of its log directories: the newest snapshot (``<end offset>-<epoch>.checkpoint``) and the
  segments after it hold ``ConfigRecord``s (``cleanup.policy`` of a ``TOPIC`` resource) and the
  ``RemoveTopicRecord``s that drop a deleted topic's.  The partition's own log directory is looked
  in, and the directory above it (a copy of one partition beside the metadata).
* Without it (a ZooKeeper-era broker keeps configurations in ZooKeeper): Kafka's internal topics
  are created compacted (``__consumer_offsets``, ``__transaction_state``, ``__share_group_state``).

``None`` where nothing beside the partition says: the tools then take ``--compacted`` as given.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from pykbatch.errors import KafkaDataError
from pykbatch.log.files import KRAFT_SNAPSHOT, LOG, base_offset_of, is_segment_file, topic_partition_of

METADATA_DIR = "__cluster_metadata-0"
TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC
COMPACTED_INTERNAL = ("__consumer_offsets", "__transaction_state", "__share_group_state")


@dataclass(frozen=True)
class Policy:
    compacted: bool
    source: str
    """Where it was read, in words (for the report's line)."""


def cleanup_policy(partition_dir: str) -> Policy | None:
    """The compaction of the topic of ``partition_dir`` (``<topic>-<partition>``), or None."""
    named = topic_partition_of(partition_dir)
    if named is None:
        return None
    topic = named[0]
    here = os.path.dirname(os.path.abspath(partition_dir))
    for log_dir in (here, os.path.dirname(here)):
        metadata = os.path.join(log_dir, METADATA_DIR)
        if os.path.isdir(metadata):
            value = _topic_configs(os.path.realpath(metadata), "cleanup.policy").get(topic)
            if value is not None:
                return Policy("compact" in value.split(","), f"cleanup.policy={value} in {metadata}")
            return Policy(False, f"no cleanup.policy for {topic} in {metadata} (Kafka's default: delete)")
    if topic in COMPACTED_INTERNAL:
        return Policy(True, f"{topic} is one of Kafka's internal topics, created compacted")
    return None


@functools.lru_cache(maxsize=8)
def _topic_configs(metadata_dir: str, name: str) -> dict:
    """topic -> the value of its config ``name`` as the metadata log leaves it (one replay for
    every partition of the log directory a command walks)."""
    from pykbatch.log.segments import Segment
    from pykbatch.topics.cluster_metadata import decode_metadata
    names = os.listdir(metadata_dir)
    snapshots = sorted((n for n in names if n.endswith(KRAFT_SNAPSHOT)), key=lambda n: int(n.split("-")[0]))
    files = [os.path.join(metadata_dir, snapshots[-1])] if snapshots else []
    after = int(snapshots[-1].split("-")[0]) if snapshots else 0  # the snapshot holds what is before
    files += sorted((os.path.join(metadata_dir, n) for n in names if is_segment_file(n, LOG)),
                    key=lambda p: base_offset_of(os.path.basename(p)))
    values: dict = {}
    ids: dict = {}
    for i, path in enumerate(files):
        snapshot = bool(snapshots) and i == 0
        with Segment(path, base_offset=0 if snapshot else None) as seg:
            for b in seg.batches():
                if b.is_control or (not snapshot and b.last_offset < after):
                    continue
                try:
                    records = [r.value for r in b if snapshot or r.offset >= after]
                except KafkaDataError:
                    continue  # a batch that does not read: its records say nothing
                for raw in records:
                    try:
                        m = decode_metadata(raw)
                    except (KafkaDataError, ValueError, KeyError, TypeError):
                        continue
                    f = m.fields
                    if m.type_name == "TOPIC_RECORD":
                        ids[f.get("TopicId")] = f.get("Name")
                    elif m.type_name == "REMOVE_TOPIC_RECORD":
                        values.pop(ids.get(f.get("TopicId")), None)  # a deleted topic's configs go with it
                    elif m.type_name == "CONFIG_RECORD" and f.get("ResourceType") == TOPIC_RESOURCE \
                            and f.get("Name") == name:
                        values[f.get("ResourceName")] = f.get("Value")
    return {topic: value for topic, value in values.items() if value is not None}
