# The batch a broker writes instead of the producer's, and what its size decides.
#
# A partition leader keeps a producer's batch as it is only when the topic stores the same codec
# and record version; otherwise ``LogValidator`` re-encodes the records (another codec, v0/v1
# messages converted to v2), and ``UnifiedLog.append`` checks the *rebuilt* batch against
# ``max.message.bytes`` again: a gzip batch well under the limit can be over it once the topic's
# ``compression.type=uncompressed`` has inflated it (MESSAGE_TOO_LARGE); ``segment.bytes`` is
# checked on it as well.  pykbatch builds the same batch with its encoder to know that size: byte
# for byte Kafka's when the topic stores records uncompressed; for a compressed target, pykbatch's
# codecs (framed as Kafka frames them) stand in for the JVM's — equal in every case the
# differential tests met, though a codec library's output is no contract.


_REBUILT_RULE = _RULES_BY_ID["append.rebuilt_too_large"]
_SEGMENT_RULE = _RULES_BY_ID["append.too_large"]


def _broker_rebuilds(batches, config):
    """Whether Kafka re-encodes these batches (LogValidator's in-place conditions fail)."""
    codec = config.target_codec
    for b in batches:
        target = b.compression if codec < 0 else COMPRESSION_NAMES[codec]
        if target != b.compression or b.magic != config.target_magic:
            return True
    return False


def _rebuilt_size(data, config):
    """The size of the one batch Kafka would write for this append, or None when it keeps the
    producer's bytes (or cannot read them: the culprits say why)."""
    try:
        batches = list(iter_batches(data))
        if not batches or not _broker_rebuilds(batches, config):
            return None
        first = batches[0]
        records = [{"key": r.key, "value": r.value, "timestamp": r.timestamp, "headers": list(r.headers)}
                   for b in batches for r in b]
    except _errors.KafkaDataError:
        return None
    codec = first.compression if config.target_codec < 0 else COMPRESSION_NAMES[config.target_codec]
    if config.target_magic < 2 and codec == "zstd":
        return None  # refused before any size is known (UNSUPPORTED_COMPRESSION_TYPE)
    fields = {}
    if first.magic >= 2 and config.target_magic >= 2:
        fields = dict(producer_id=first.producer_id, producer_epoch=first.producer_epoch,
                      base_sequence=first.base_sequence, is_transactional=first.is_transactional)
    return len(build_batch(records, compression=codec, magic=config.target_magic, **fields))


def _check_rebuilt_size(result, data, config):
    """Adds ``append.rebuilt_too_large`` when the batch Kafka would write is larger than
    ``max.message.bytes``, else ``append.too_large`` when it is larger than ``segment.bytes``
    (UnifiedLog.append checks both on what it writes), for a producer's append that passed every
    other check of Kafka's.  The validator calls it only where Kafka may re-encode
    (``_Validator.rebuilt``); where the topic re-encodes every batch it leaves the segment check
    to it."""
    if config.origin != "client" or any(c.kafka for c in result.culprits):
        return result
    size = _rebuilt_size(data, config)
    if size is not None and config.max_message_bytes is not None and size > config.max_message_bytes:
        return _add_size_culprit(result, _REBUILT_RULE, size, config.max_message_bytes, config)
    written = size if size is not None else result.valid_bytes
    if config.reencodes and config.segment_bytes is not None and written > config.segment_bytes:
        return _add_size_culprit(result, _SEGMENT_RULE, written, config.segment_bytes, config)
    return result


def _add_size_culprit(result, rule, size, limit, config):
    message, detail = _render(rule, (size, limit, 0), config.topic_partition)
    result.culprits.append(Culprit(0, None, None, rule.code, rule.id, 0, None, 0, message, detail, True))
    result.culprit_count += 1
    result.counters[rule.id] = result.counters.get(rule.id, 0) + 1
    return result
