"""Type stubs of the compiled module (pykbatch/_native.pyx)."""
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple, Optional, Sequence, Tuple, Union, final

import pyarrow
from typing_extensions import TypeAlias, disjoint_base

from pykbatch.config import ValidationConfig
from pykbatch.errors import KafkaDataError
from pykbatch.result import LostSpan, TruncatedTail, ValidationResult

_Buffer: TypeAlias = Union[bytes, bytearray, memoryview, Any]  # any object with the buffer protocol (mmap too)
_Headers: TypeAlias = Tuple[Tuple[str, Optional[bytes]], ...]

COMPRESSION_NAMES: Tuple[str, ...]
CREATE_TIME: str
LOG_APPEND_TIME: str
RULES: Tuple[Any, ...]

def native_info() -> dict[str, Any]: ...
def crc32c(data: _Buffer, value: int = 0) -> int: ...
def crc32(data: _Buffer, value: int = 0) -> int: ...

@final
class Record:
    offset: int
    timestamp: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: _Headers
    sequence: int
    offset_delta: int
    timestamp_delta: int
    attributes: int
    position: int
    crc: Optional[int]
    is_valid: Optional[bool]

@disjoint_base
class Batch:
    position: int
    size: int
    entry: int
    base_offset: int
    length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    compression: str
    timestamp_type: str
    is_transactional: bool
    is_control: bool
    control: Optional[Any]
    control_type: Optional[str]
    has_delete_horizon: bool
    delete_horizon_ms: Optional[int]
    last_offset: int
    next_offset: int
    last_sequence: int
    raw: memoryview
    is_valid: bool
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[Record]: ...
    def tuples(self) -> Iterator[Tuple[int, int, Optional[bytes], Optional[bytes], _Headers]]: ...
    def records(self) -> list[Record]: ...
    def readable(self) -> Iterator[Union[Record, KafkaDataError]]: ...

@disjoint_base
class LegacyBatch(Batch):
    offset: int
    record_count: None  # type: ignore[assignment]

@disjoint_base
class BatchReader(Iterator[Union[Batch, LegacyBatch]]):
    truncated_tail: Optional[TruncatedTail]
    def __new__(cls, buf: _Buffer, verify_crc: bool = ..., max_decompressed_bytes: int = ...,
                start: int = ..., on_lost: Optional[Callable[[LostSpan], Any]] = ...) -> BatchReader: ...
    def __next__(self) -> Union[Batch, LegacyBatch]: ...

def entry_is_sound(buf: _Buffer, pos: int = 0, *, v2_only: bool = False) -> bool: ...
def next_sound_batch(buf: _Buffer, start: int = 0) -> int | None: ...
def iter_batches(buf: _Buffer, *, verify_crc: bool = True, max_decompressed_bytes: int = ...) -> BatchReader: ...
def validate(buf: _Buffer, config: Optional[ValidationConfig] = None, *,
             on_error: Optional[Callable[..., Any]] = None) -> ValidationResult: ...
def to_arrow(buf: _Buffer, *, verify_crc: bool = True, zero_copy: bool = False,
             spark_time: bool = False) -> pyarrow.Table: ...
def consume(buf: _Buffer, fetch_offset: int, *, topic: str = "t", partition: int = 0, committed: bool = False,
            last_stable_offset: Optional[int] = None, compacted: bool = False,
            aborted: Sequence[Tuple[int, int]] = (), max_decompressed_bytes: int = ...
            ) -> Optional[tuple[pyarrow.Table, int, list[tuple[int, int, str]], int, Optional[int], frozenset[int]]]: ...
def fetch_end(buf: _Buffer, position: int, last_stable_offset: Optional[int] = None) -> int: ...
def consumer_records(table: pyarrow.Table, record: Any) -> list[Any]: ...

class ControlRecord(NamedTuple):
    type: int
    type_name: str
    coordinator_epoch: Optional[int]

def control_type(key: Optional[_Buffer]) -> int: ...
def parse_control(key: Optional[_Buffer], value: Optional[_Buffer]) -> ControlRecord: ...
def build_batch(records: Iterable[Union[Mapping[str, Any], Tuple[Optional[bytes], Optional[bytes]], Any]], *,
                base_offset: int = 0, partition_leader_epoch: int = -1, producer_id: int = -1,
                producer_epoch: int = -1, base_sequence: int = -1, is_transactional: bool = False,
                is_control: bool = False, timestamp_type: str = "CreateTime",
                max_timestamp: Optional[int] = None, compression: str = "none", magic: int = 2) -> bytes: ...
def encode(batches: Iterable[Any]) -> bytes: ...
def murmur2(key: _Buffer) -> int: ...
def key_partition(key: _Buffer, partitions: int) -> int: ...
def partition_keys(keys: Any, partitions: int) -> Any: ...
def batch_ends(sizes: Any, limit: int) -> Any: ...
def build_batch_arrow(keys: Any, values: Any, rows: Any, *, timestamps: Any = None, headers: Any = None,
                      compression: str = "none", producer_id: int = -1, producer_epoch: int = -1,
                      base_sequence: int = -1, is_transactional: bool = False, now_ms: int = -1) -> bytes: ...
@disjoint_base
class ArrowBatcher:
    @property
    def now_ms(self) -> int: ...
    def __new__(cls, keys: Any, values: Any, *, timestamps: Any = None, headers: Any = None,
                now_ms: int = -1) -> ArrowBatcher: ...
    def build(self, rows: Any, compression: str = "none", producer_id: int = -1, producer_epoch: int = -1,
              base_sequence: int = -1, is_transactional: bool = False) -> bytes: ...
    def build_many(self, rows: Any, ends: Any, compression: str = "none", producer_id: int = -1,
                   producer_epoch: int = -1, base_sequence: int = -1,
                   is_transactional: bool = False) -> list[bytearray]: ...
def settle_delivered(outcome: Any, partitions: Any, offsets: Any, rows: Any, partition: int, base_offset: int,
                     delivered: int, pending: int) -> int: ...
def restamp_v2(batch: bytearray, *, producer_id: int, producer_epoch: int, base_sequence: int) -> None: ...
def frame_v2(records: Optional[_Buffer], *, base_offset: int, partition_leader_epoch: int, attributes: int,
             last_offset_delta: int, base_timestamp: int, max_timestamp: int, producer_id: int,
             producer_epoch: int, base_sequence: int, record_count: int,
             crc: Optional[int] = None, build: bool = True) -> Tuple[Optional[bytes], int]: ...
AVRO_OPS: dict[str, int]
AVRO_COLUMN_KINDS: dict[str, int]
FRAMINGS: dict[str, int]
def read_frame(value: _Buffer, framing: str = "confluent") -> tuple[int, int, list[int]]: ...
def read_frames(values: Any, framing: str = "confluent") -> tuple[Any, Any, Any, Any, Any]: ...
@disjoint_base
class AvroColumns:
    def __new__(cls, specs: Any, column_children: Any, root: int, rows_hint: int = ...) -> AvroColumns: ...
    def column(self, i: int) -> tuple[int, int, Any, Any, Any, Any]: ...
    @property
    def rows(self) -> int: ...
def avro_decode(values: Any, payloads: Any, programs_of_rows: Any, programs: Sequence[Any], out: AvroColumns,
                allow_trailing: bool = False) -> tuple[Any, Any, Any]: ...
def drop_culprits(buf: _Buffer, result: Optional[ValidationResult] = None, *,
                  config: Optional[ValidationConfig] = None, unrepairable: str = "drop") -> Any: ...

@disjoint_base
class _View:
    obj: Any
    length: int
    def __new__(cls, obj: _Buffer) -> _View: ...

def _decode_rows(v: _View, starts: Sequence[int], ends: Sequence[int], valid: Any, verify_crc: bool,
                 raise_errors: bool, zero_copy: bool = False, max_decompressed_bytes: int = ..., spark_time: bool = False) -> tuple[Any, ...]: ...
def _validate_mapped(buf: _Buffer, config: Optional[ValidationConfig] = None, every: int = ...,
                     progress: Optional[Callable[[int], Any]] = ...) -> ValidationResult: ...
def validate_each(batches: Iterable[_Buffer], config: Optional[ValidationConfig] = None) -> dict[int, ValidationResult]: ...
def _validate_rows(v: _View, starts: Sequence[int], ends: Sequence[int], valid: Any, config: Any) -> tuple[Any, ...]: ...
def _v2_header_table(buf: _Buffer) -> Optional[dict[str, Any]]: ...
def _crc32c_sw(data: _Buffer, value: int = 0) -> int: ...
def _read_varint(data: _Buffer, kind: str = "varint") -> Tuple[int, int]: ...
