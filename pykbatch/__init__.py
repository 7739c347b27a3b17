"""pykbatch: read, check and repair Apache Kafka record batches.

    import pykbatch as kb
    for batch in kb.iter_batches(buf):
        for rec in batch: rec.offset, rec.key, rec.value
    result = kb.validate(buf)      # every culprit, plus the KIP-467 fields
    table = kb.to_arrow(buf)       # one row per record
"""
try:
    from pykbatch._native import (  # noqa: F401
        Batch, BatchReader, LegacyBatch, Record, build_batch, crc32, crc32c, drop_culprits, encode, entry_is_sound,
        iter_batches, native_info, next_sound_batch, to_arrow, validate,
    )
except ImportError as exc:  # pragma: no cover - exercised by test_native_required
    raise ImportError(
        "pykbatch's native extension (pykbatch._native) could not be loaded; pykbatch has no "
        "pure-Python fallback. Install a wheel for this platform or build from source with a C "
        f"compiler (pip install .). Cause: {exc}"
    ) from exc

from pykbatch import errors  # noqa: E402,F401
from pykbatch.config import ValidationConfig  # noqa: E402,F401
from pykbatch.result import Culprit, DroppedRecord, LostSpan, Repair, TruncatedTail, ValidationResult  # noqa: E402,F401
from pykbatch.kafka.producer_state import ProducerStateTracker, audit_producers  # noqa: E402,F401
from pykbatch.log import Partition, Segment, open_partition, read_segment  # noqa: E402,F401
from pykbatch.errors import (  # noqa: E402,F401
    CorruptRecordError, InvalidRecordError, InvalidTimestampError, KafkaDataError,
    UnrepairableError, UnsupportedCompressionTypeError, UnsupportedForMessageFormatError,
)

try:  # written at build time from the git tags (pyproject.toml's [tool.setuptools_scm])
    from pykbatch._version import __version__  # noqa: E402
except ImportError:  # pragma: no cover - a source tree used without being built
    __version__ = "0.0.0+unknown"
__all__ = [
    "Batch", "BatchReader", "LegacyBatch", "Record", "Culprit", "TruncatedTail", "LostSpan", "ValidationConfig",
    "ValidationResult", "build_batch", "crc32", "crc32c", "drop_culprits", "DroppedRecord", "Repair", "encode",
    "entry_is_sound", "next_sound_batch", "iter_batches", "native_info", "to_arrow", "validate", "errors",
    "KafkaDataError", "CorruptRecordError", "InvalidRecordError", "InvalidTimestampError",
    "UnsupportedCompressionTypeError", "UnsupportedForMessageFormatError", "UnrepairableError",
    "ProducerStateTracker", "audit_producers", "Segment", "Partition", "read_segment", "open_partition",
]
