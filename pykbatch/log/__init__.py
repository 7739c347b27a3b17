"""A partition's files on disk or in object storage (Kafka's LogSegment, OffsetIndex, TimeIndex,
TransactionIndex, ProducerStateManager): their names (``files``), the index and state readers with
Kafka's checks (``indexes``), segments and partition directories (``segments``) and the windows a
segment is decoded in (``windows``). The dump prints what these return; the audit and the Spark
source check with them."""
from pykbatch.log.files import LOG, base_offset_of, is_segment_file, segment_file_name, sibling, suffix_of, topic_partition_of
from pykbatch.log.indexes import (
    INDEX_TYPES, Checkpoint, CorruptIndexError, IndexEntry, OffsetIndex, ProducerSnapshot, TimeIndex, TimeIndexEntry,
    TxnIndex,
)
from pykbatch.log.segments import Partition, Segment, index_entry_trusted, open_partition, read_segment
from pykbatch.log.windows import entry_windows
from pykbatch.log.truth import read_partition

__all__ = [
    "LOG", "INDEX_TYPES", "Checkpoint", "CorruptIndexError", "IndexEntry", "OffsetIndex", "Partition",
    "ProducerSnapshot", "Segment", "TimeIndex", "TimeIndexEntry", "TxnIndex", "base_offset_of", "entry_windows",
    "index_entry_trusted", "is_segment_file", "open_partition", "read_partition", "read_segment", "segment_file_name",
    "sibling",
    "suffix_of", "topic_partition_of",
]
