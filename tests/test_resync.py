"""Finding entries again (csrc/kb_resync.c): what a repair skipping damage and the Spark source
checking a stale index's positions both rely on."""
import pytest

import pykbatch as kb


def _batch(magic=2, value=b"v"):
    return kb.build_batch([{"key": b"k", "value": value}], magic=magic)


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_a_whole_entry_with_its_checksum_is_sound(magic):
    data = _batch(magic)
    assert kb.entry_is_sound(data)
    assert kb.entry_is_sound(b"junk" + data, 4)
    assert kb.entry_is_sound(data, v2_only=True) is (magic == 2)
    damaged = bytearray(data)
    damaged[-1] ^= 1  # the value's last byte: the checksum no longer matches
    assert not kb.entry_is_sound(bytes(damaged))


@pytest.mark.parametrize("cut", [1, 12, 30])
def test_a_cut_entry_or_a_position_past_the_end_is_not(cut):
    data = _batch()
    assert not kb.entry_is_sound(data[:-cut])
    assert not kb.entry_is_sound(data, len(data))
    assert not kb.entry_is_sound(data, len(data) + 5)
    assert not kb.entry_is_sound(data, -1)


def test_next_sound_batch_skips_garbage_and_false_starts():
    first, second = _batch(value=b"a" * 40), _batch(value=b"b")
    fake = bytearray(first)
    fake[30] ^= 0xFF  # a magic byte of 2 where a batch seems to start, with a wrong CRC
    data = b"\x02" * 40 + bytes(fake) + second
    assert kb.next_sound_batch(data) == 40 + len(fake)
    assert kb.next_sound_batch(data, 40 + len(fake) + 1) is None
    assert kb.next_sound_batch(b"") is None
    assert kb.next_sound_batch(first + second, 0) == 0
    assert kb.next_sound_batch(first + second, 1) == len(first)


def test_next_sound_batch_ignores_v0_v1():
    assert kb.next_sound_batch(_batch(1) + _batch(0)) is None
