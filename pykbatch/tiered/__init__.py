"""Tiered storage (KIP-405) read offline: remote stores, their metadata, partitions as the broker
serves them.  See ``partition.py`` for the entry points."""
from .layouts import LAYOUTS, Layout, LocalTieredStorage, RemoteObject, open_store  # noqa: F401
from .metadata import TopicIdPartition, decode_value, records_of_segments  # noqa: F401
from .partition import NoMetadataWarning, Piece, Report, TieredPartition, TieredTopicStore  # noqa: F401
from .remote_log import Lineage, RemotePartition, replay  # noqa: F401
