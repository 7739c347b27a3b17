"""The readers compared: pykbatch's paths and the peers', each touching every record's
offset, timestamp, key, value and headers after checking the batch CRC."""
import aiokafka.record.memory_records as aiokafka_memory
import kafka.record.memory_records as kp_memory

import pykbatch as kb


LOG = kb.ValidationConfig(origin="log")  # the workloads are log data (fetched batches), not produce requests


def pykbatch_validate(data):
    result = kb.validate(data, LOG)
    assert result.ok
    return result.records


def pykbatch_objects(data):
    n = 0
    for batch in kb.iter_batches(data):
        for r in batch:
            r.offset, r.timestamp, r.key, r.value, r.headers
            n += 1
    return n


def pykbatch_tuples(data):
    n = 0
    for batch in kb.iter_batches(data):
        for offset, timestamp, key, value, headers in batch.tuples():
            n += 1
    return n


def pykbatch_arrow(data):
    return kb.to_arrow(data).num_rows


def pykbatch_arrow_views(data):
    return kb.to_arrow(data, zero_copy=True).num_rows


def _peer(memory_records_cls, data):
    n = 0
    records = memory_records_cls(data)
    while True:
        batch = records.next_batch()
        if batch is None:
            break
        assert batch.validate_crc()
        for r in batch:
            r.offset, r.timestamp, r.key, r.value, r.headers
            n += 1
    return n


def aiokafka_compiled(data):
    return _peer(aiokafka_memory.MemoryRecords, data)


def kafka_python(data):
    return _peer(kp_memory.MemoryRecords, data)


READERS = {
    "pykbatch.validate": pykbatch_validate,
    "pykbatch objects": pykbatch_objects,
    "pykbatch tuples": pykbatch_tuples,
    "pykbatch.to_arrow": pykbatch_arrow,
    "to_arrow zero_copy": pykbatch_arrow_views,
    "aiokafka (C ext)": aiokafka_compiled,
    "kafka-python": kafka_python,
}
