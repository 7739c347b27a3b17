"""Live clusters: a reader that is never stuck on a damaged batch (``Reader``), on kafka-python's
connection layer (TLS, SASL, API versions), with pykbatch's validator on every fetched byte.

    from pykbatch.live import Reader
    from pykbatch.policy import ErrorPolicy
    with Reader({"bootstrap.servers": "broker:9092"}, subscribe="orders", starting_offsets="earliest",
                ending_offsets="latest", policy=ErrorPolicy(tolerance="all")) as reader:
        table = reader.read()      # Spark's Kafka columns + leader_epoch, as Arrow
        reader.skips               # each unreadable range, with its culprits
"""
from pykbatch.live.cluster import (  # noqa: F401
    AuthenticationError, AuthorizationError, Cluster, ClusterError, TopicPartition, UnknownTopicError,
)
from pykbatch.live.skip_sinks import DeadLetterTopic, JsonLinesDeadLetters  # noqa: F401
from pykbatch.live.fetched import Fetched, Skip, read_fetched  # noqa: F401
from pykbatch.live.ledger import AccountingError, Ledger  # noqa: F401
from pykbatch.live.reader import (  # noqa: F401
    SCHEMA, ConsumedRecord, DataLossError, Poll, Reader, UnreadableRecordsError, records_of,
)
from pykbatch.live.settings import SettingsError  # noqa: F401
from pykbatch.live.produced import (  # noqa: F401
    Delivery, ProduceError, ProduceFailedError, ProduceReport, RecordOutcome,
)
from pykbatch.live.producer import Producer  # noqa: F401
from pykbatch.live.transactions import (  # noqa: F401
    FatalProducerError, ProducerFencedError, TransactionAbortableError,
)

__all__ = ["Reader", "Poll", "ConsumedRecord", "Skip", "Fetched", "read_fetched", "records_of", "SCHEMA",
           "Ledger", "AccountingError",
           "Cluster", "TopicPartition", "ClusterError", "AuthenticationError", "AuthorizationError",
           "UnknownTopicError", "DataLossError", "UnreadableRecordsError", "SettingsError",
           "DeadLetterTopic", "JsonLinesDeadLetters", "Producer", "Delivery", "ProduceError", "ProduceFailedError",
           "ProduceReport", "RecordOutcome", "FatalProducerError", "ProducerFencedError", "TransactionAbortableError"]
