"""What a validation checks and how it reports: ``ValidationConfig`` (a topic's settings, the
origin of the bytes, the limits)."""
from __future__ import annotations

from dataclasses import dataclass

from pykbatch._catalogue import CODEC_IDS, CODEC_NAMES, CREATE_TIME, TIMESTAMP_TYPES

ORIGINS = ("client", "log", "replication")
LONG_MAX = 2**63 - 1
KAFKA4_AFTER_MAX_MS = 3_600_000  # message.timestamp.after.max.ms since Kafka 4.0 (KIP-1030)
# Kafka's compression.type values; "producer" keeps each batch's own codec
# a topic's compression.type: "producer" keeps each batch's codec, "uncompressed" is codec none
TARGET_COMPRESSIONS = ("producer", "uncompressed") + CODEC_NAMES[1:]

@dataclass(frozen=True)
class ValidationConfig:
    """What to check and how to report it.

    origin
        ``"client"``: the bytes are a producer's batch as a partition leader
        receives it (Kafka's checks B2-B4: ``lastOffsetDelta + 1 == count``,
        record offset deltas equal to their index, maxTimestamp equal to the
        largest record timestamp).  ``"log"``: batches already in a log, where
        compaction removes records but keeps ``lastOffsetDelta`` and
        ``maxTimestamp``; offset deltas must only increase and stay within
        ``lastOffsetDelta``.  ``"replication"``: the same, named after Kafka's
        AppendOrigin for a follower's fetch of a leader's log.
    verify_crc
        Check the CRC-32C of every batch.
    strict
        Also apply pykbatch's rules that Kafka does not enforce (``Culprit.kafka`` is
        False for them): record offset deltas increasing and within ``lastOffsetDelta``
        (and equal to the index for ``"client"``), record timestamps not above
        ``maxTimestamp``.  False gives Kafka's verdict alone.
    max_culprits
        Culprits kept in the result; ``culprit_count`` still counts all.
    compacted
        The topic's ``cleanup.policy`` contains ``compact``: every record needs a key.
    timestamp_type
        The topic's ``message.timestamp.type``: ``"CreateTime"`` (records must fall in the window
        below) or ``"LogAppendTime"`` (the broker stamps; producers may not).
    timestamp_before_max_ms, timestamp_after_max_ms
        ``message.timestamp.before.max.ms`` / ``after.max.ms`` (KIP-937), measured from ``now_ms``
        (default: the time of the call).  Kafka 4's defaults: no limit into the past
        (Long.MAX_VALUE), one hour into the future (KIP-1030).  The timestamp rules judge a
        producer's append against the leader's clock, so they apply to ``origin="client"`` only.
    max_decompressed_bytes
        Cap on the decompressed records of one batch, enforced while decompressing; a batch
        that would pass it gets a ``batch.decompressed_too_large`` culprit (default 64 MiB:
        64:1 compression of Kafka's default 1 MiB max.request.size / message.max.bytes).
    topic_partition
        Rendered into Kafka's messages (``"topic partition t-0"``).
    max_message_bytes
        The topic's ``max.message.bytes`` (Kafka's default 1048588); a client batch above it is
        MESSAGE_TOO_LARGE.  None: unchecked.
    segment_bytes
        The topic's ``segment.bytes`` (default 1 GiB); client bytes above it are
        RECORD_LIST_TOO_LARGE.  None: unchecked.
    target_magic
        The topic's record version: 2 on every Kafka 3.0+ broker (KIP-724).  0 or 1 checks what
        a down-converting broker refuses (transactional / idempotent batches, record headers).
    target_compression
        The topic's ``compression.type``: ``"producer"`` (default) keeps each batch's codec;
        together with ``target_magic`` it picks Kafka's validation path.
    single_append
        The buffer is one partition's records of one produce request, so Kafka's rules for an
        append as a whole apply: one batch when magic 2 or compressed
        ("Compressed outer record has more than one batch"), one magic throughout (B1).
        False (default): a stream of batches, each checked on its own.
    produce_version
        The ProduceRequest version the bytes came in (3+): also Kafka's request-level checks,
        with their messages ("Produce requests with version N ..."); implies ``single_append``.
    timestamp_difference_max_ms
        The deprecated ``message.timestamp.difference.max.ms`` of a Kafka 3.x topic (removed in
        4.0): it stands in for a window limit left at its default (``timestamp_window``).
    """

    origin: str = "client"
    verify_crc: bool = True
    strict: bool = True
    max_culprits: int = 1000
    topic_partition: str = "t-0"
    max_decompressed_bytes: int = 64 * 1024 * 1024
    compacted: bool = False
    timestamp_type: str = CREATE_TIME
    timestamp_before_max_ms: int = LONG_MAX
    timestamp_after_max_ms: int = KAFKA4_AFTER_MAX_MS
    now_ms: int | None = None
    max_message_bytes: int | None = 1048588
    segment_bytes: int | None = 1024 * 1024 * 1024
    target_magic: int = 2
    target_compression: str = "producer"
    single_append: bool = False
    produce_version: int | None = None
    timestamp_difference_max_ms: int | None = None

    @property
    def target_codec(self) -> int:
        """The codec id the topic stores batches in (``target_compression``); -1 for "producer"."""
        if self.target_compression == "producer":
            return -1
        return CODEC_IDS.get(self.target_compression, 0)  # "uncompressed"

    @property
    def reencodes(self) -> bool:
        """Whether the topic re-encodes every producer batch (its ``compression.type`` is not
        ``producer``, or it stores an older record version)."""
        return self.target_compression != "producer" or self.target_magic < 2

    @property
    def timestamp_window(self) -> tuple[int, int]:
        """The (before, after) limits in force: the deprecated difference setting stands in for
        a limit left at its default, as Kafka 3.6-3.9 read them (LogConfig)."""
        before, after = self.timestamp_before_max_ms, self.timestamp_after_max_ms
        diff = self.timestamp_difference_max_ms
        if diff is not None:
            before = diff if before == LONG_MAX else before
            after = diff if after in (LONG_MAX, KAFKA4_AFTER_MAX_MS) else after
        return before, after

    def __post_init__(self):
        if self.origin not in ORIGINS:
            raise ValueError(f"origin must be one of {ORIGINS}, not {self.origin!r}")
        if self.max_culprits < 0:
            raise ValueError("max_culprits must be >= 0")
        if self.max_decompressed_bytes < 0:
            raise ValueError("max_decompressed_bytes must be >= 0")
        if self.timestamp_type not in TIMESTAMP_TYPES:
            raise ValueError(f"timestamp_type must be {' or '.join(map(repr, TIMESTAMP_TYPES))}")
        if self.timestamp_before_max_ms < 0 or self.timestamp_after_max_ms < 0 \
                or (self.timestamp_difference_max_ms or 0) < 0:
            raise ValueError("timestamp windows must be >= 0")
        for name in ("max_message_bytes", "segment_bytes"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0 or None")
        if self.target_magic not in (0, 1, 2):
            raise ValueError("target_magic must be 0, 1 or 2")
        if self.target_compression not in TARGET_COMPRESSIONS:
            raise ValueError(f"target_compression must be one of {TARGET_COMPRESSIONS}")
        if self.produce_version is not None and not 3 <= self.produce_version < 32768:
            raise ValueError("produce_version: Kafka checks the records of ProduceRequest v3 and later")
