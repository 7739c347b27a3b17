"""Kafka's own topics decoded from Kafka's message definitions: ``__consumer_offsets``,
``__transaction_state``, ``__share_group_state`` (coordinator records: ``coordinator.py``) and the
KRaft ``__cluster_metadata`` log (``cluster_metadata.py``); ``__remote_log_metadata`` is in
``pykbatch.tiered.metadata``."""
from pykbatch.topics.coordinator import CoordinatorRecord, decode_coordinator  # noqa: F401
from pykbatch.topics.cluster_metadata import MetadataRecord, decode_metadata  # noqa: F401
