"""The live reader's parts that need no broker: what a fetch's bytes give (``read_fetched``),
read_committed's holds, and the connection settings (names, security, secrets).  The same paths
on a real broker's damaged log: tests/test_live_reader.py."""
from __future__ import annotations

import os
import random
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pykbatch as kb
from pykbatch import _native
from pykbatch.kafka.control import ABORT, COMMIT
from pykbatch.kafka.isolation import DROP, HOLD, KEEP, Isolation
from pykbatch.live.fetched import read_fetched
from pykbatch.live.settings import SettingsError, connection_kwargs, redacted
from pykbatch.log.indexes import AbortedTxn


def batch(base, n=5, codec="none", **kw):
    return kb.build_batch([(b"k%d" % (base + i), b"value-%05d" % (base + i)) for i in range(n)], base_offset=base,
                          compression=codec, **kw)


def fix_crc(b: bytes) -> bytes:
    b = bytearray(b)
    struct.pack_into(">I", b, 17, kb.crc32c(bytes(b[21:])))
    return bytes(b)


def offsets(f):
    return f.table.column("offset").to_pylist()


def test_sound_batches_from_the_fetch_offset():
    data = batch(0) + batch(5) + batch(10)
    f = read_fetched(data, 7)
    assert offsets(f) == list(range(7, 15)) and f.skips == [] and f.next_offset == 15


def test_a_crc_mismatch_skips_its_batch_exactly_when_a_sound_batch_follows():
    mid = bytearray(batch(5))
    mid[70] ^= 1
    f = read_fetched(batch(0) + bytes(mid) + batch(10), 0, topic="orders", partition=3)
    assert offsets(f) == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]
    (s,) = f.skips
    assert (s.first_offset, s.last_offset, s.rule, s.code) == (5, 9, "batch.crc_mismatch", 2)
    assert "orders-3" in s.message and s.data == bytes(mid)
    assert s.position == len(batch(0)) + 17  # the CRC field of the damaged batch, in the fetched bytes
    assert f.next_offset == 15 and f.damage is None


def test_damage_ending_a_response_is_left_to_the_probe():
    mid = bytearray(batch(5))
    mid[70] ^= 1
    f = read_fetched(batch(0) + bytes(mid), 0)
    assert offsets(f) == [0, 1, 2, 3, 4] and f.skips == []
    assert f.next_offset == 5 and f.damage.first_offset == 5 and f.damage.culprits[0].rule == "batch.crc_mismatch"


def test_garbage_between_sound_batches_is_resynchronised():
    garbage = random.Random(7).randbytes(len(batch(5)))
    f = read_fetched(batch(0) + garbage + batch(10), 0)
    assert offsets(f) == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]
    (s,) = f.skips
    assert (s.first_offset, s.last_offset) == (5, 9) and s.rule.startswith("framing.")


def test_a_lying_record_length_under_a_sound_crc_keeps_the_records_before_it():
    b = batch(5)
    at = [r.position for r in next(iter(kb.iter_batches(b)))][3]
    lie = bytearray(b)
    lie[at] += 8
    f = read_fetched(batch(0) + fix_crc(bytes(lie)) + batch(10), 0)
    assert offsets(f) == [0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14]
    (s,) = f.skips
    assert (s.first_offset, s.last_offset, s.rule) == (8, 9, "record.size_mismatch")
    # the records kept are the writer's
    assert f.table.column("value").to_pylist()[5:8] == [b"value-00005", b"value-00006", b"value-00007"]


def test_a_partial_batch_at_the_end_is_not_damage():
    whole, nxt = batch(0), batch(5)
    f = read_fetched(whole + nxt[:30], 0)
    assert offsets(f) == [0, 1, 2, 3, 4] and f.skips == [] and f.damage is None and f.next_offset == 5
    f = read_fetched(nxt[:30], 5)
    assert f.table.num_rows == 0 and f.partial_size == len(nxt) and f.next_offset == 5


@given(st.integers(0, 4), st.integers(0, 400))
def test_any_cut_loses_nothing_and_flags_nothing(start_batch, cut):
    """Whatever byte a response is cut at, what is delivered is a prefix of the records from the
    fetch offset, nothing is flagged, and the next fetch starts right after it."""
    data = b"".join(batch(5 * i) for i in range(5))
    fetch_offset = 5 * start_batch
    data = data[sum(len(batch(5 * i)) for i in range(start_batch)):]
    f = read_fetched(data[:cut], fetch_offset)
    assert f.skips == [] and f.damage is None
    got = offsets(f)
    assert got == list(range(fetch_offset, fetch_offset + len(got))) and f.next_offset == fetch_offset + len(got)


def control(base, pid, kind):
    key = struct.pack(">hh", 0, 0 if kind == ABORT else 1)
    value = struct.pack(">hi", 0, 0)
    return kb.build_batch([(key, value)], base_offset=base, producer_id=pid, producer_epoch=0, is_transactional=True,
                          is_control=True)


def txn(base, pid, n=3):
    return batch(base, n, producer_id=pid, producer_epoch=0, base_sequence=base, is_transactional=True)


def test_read_committed_drops_aborted_and_markers():
    data = txn(0, 7) + control(3, 7, ABORT) + txn(4, 7) + control(7, 7, COMMIT)
    f = read_fetched(data, 0, isolation=Isolation("read_committed", [AbortedTxn(0, 7, 0, 3, -1)], None, None))
    assert offsets(f) == [4, 5, 6] and f.skips == []


def test_an_unreadable_abort_marker_holds_the_producers_next_records():
    marker = bytearray(control(3, 7, ABORT))
    marker[-2] ^= 1
    data = txn(0, 7) + bytes(marker) + txn(4, 7) + batch(7) + control(12, 7, COMMIT) + txn(13, 7)
    f = read_fetched(data, 0, isolation=Isolation("read_committed", [AbortedTxn(0, 7, 0, 3, -1)], None, None))
    assert offsets(f) == [7, 8, 9, 10, 11, 13, 14, 15]  # plain records go on; after P's next marker, P's too
    assert [(s.first_offset, s.last_offset, s.rule, s.held) for s in f.skips] == [
        (3, 3, "batch.crc_mismatch", False), (4, 6, "consumer.marker_unreadable", True)]


def test_isolation_decides_a_new_aborted_transaction_after_an_unreadable_entry():
    iso = Isolation("read_committed", [AbortedTxn(0, 7, 0, 3, -1), AbortedTxn(0, 7, 10, 12, -1)], None, None)
    b = {x.base_offset: x for x in kb.iter_batches(txn(0, 7) + txn(4, 7) + txn(10, 7))}
    assert iso.decide(b[0]) == DROP
    assert iso.unreadable(3) == [7]
    assert iso.decide(b[4]) == HOLD  # the entry at 3 may have been 7's ABORT marker, or not
    assert iso.decide(b[10]) == DROP  # the broker lists a new aborted transaction of 7 here
    assert Isolation().decide(b[4]) == KEEP


def test_a_marker_whose_key_does_not_read_is_an_unreadable_entry():
    """A control batch (CRC sound) whose key is no control key: it may have been the producer's ABORT
    marker or not -- the producer's next transactional records are held, never guessed; no
    exception."""
    bad = kb.build_batch([(b"\x00\x00\x00", struct.pack(">hi", 0, 0))], base_offset=3, producer_id=7,
                         producer_epoch=0, is_transactional=True, is_control=True)
    b = {x.base_offset: x for x in kb.iter_batches(txn(0, 7) + bad + txn(4, 7) + control(7, 7, COMMIT) + txn(8, 7))}
    iso = Isolation("read_committed", [AbortedTxn(0, 7, 0, 3, -1)], None, None)
    assert [iso.decide(b[o]) for o in (0, 3, 4, 7, 8)] == [DROP, DROP, HOLD, DROP, KEEP]


def test_settings_take_kafkas_names_and_refuse_unknown_ones():
    kw = connection_kwargs({"kafka.bootstrap.servers": "b:9093", "kafka.security.protocol": "sasl_ssl",
                            "kafka.sasl.mechanism": "SCRAM-SHA-512",
                            "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
                                                      'required username="alice" password="s3cr\\"et";',
                            "kafka.ssl.truststore.location": "/ca.pem", "kafka.ssl.truststore.type": "PEM"})
    assert kw["bootstrap_servers"] == "b:9093" and kw["security_protocol"] == "SASL_SSL"
    assert (kw["sasl_plain_username"], kw["sasl_plain_password"]) == ("alice", 's3cr\\"et')
    assert kw["ssl_cafile"] == "/ca.pem" and kw["ssl_check_hostname"] is True
    with pytest.raises(SettingsError, match="sasl.mechansim"):
        connection_kwargs({"bootstrap.servers": "b", "sasl.mechansim": "PLAIN"})
    with pytest.raises(SettingsError, match="ssl.truststore.type=PEM"):
        connection_kwargs({"bootstrap.servers": "b", "security.protocol": "SSL", "ssl.truststore.location": "x.jks"})
    with pytest.raises(SettingsError, match="needs credentials"):
        connection_kwargs({"bootstrap.servers": "b", "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"})
    with pytest.raises(SettingsError, match="security.protocol is PLAINTEXT"):
        connection_kwargs({"bootstrap.servers": "b", "ssl.ca.location": "/ca.pem"})
    with pytest.raises(SettingsError, match="always verifies"):
        connection_kwargs({"bootstrap.servers": "b", "security.protocol": "SSL",
                           "enable.ssl.certificate.verification": "false"})


def test_secrets_never_show():
    props = {"bootstrap.servers": "b", "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
             "sasl.username": "alice", "sasl.password": "hunter2", "kafka.ssl.key.password": "k3y"}
    shown = repr(redacted(props))
    assert "hunter2" not in shown and "k3y" not in shown and "alice" in shown
    from pykbatch.live import Cluster
    assert "hunter2" not in repr(Cluster(props))
    with pytest.raises(SettingsError) as err:
        connection_kwargs({**props, "sasl.password": "hunter2", "typo.setting": "x"})
    assert "hunter2" not in str(err.value)


# -- every offset accounted for: gaps, compaction and the ledger ------------------------------------
def test_offsets_between_two_batches_are_a_named_skip_unless_the_topic_is_compacted():
    data = batch(0) + batch(10)  # 5..9: no batch holds them
    f = read_fetched(data, 0)
    assert offsets(f) == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14] and f.next_offset == 15
    assert [(s.first_offset, s.last_offset, s.rule, s.code) for s in f.skips] == [(5, 9, "consumer.offset_gap", 2)]
    assert f.spans == [(0, 4, "read"), (5, 9, "skipped"), (10, 14, "read")]
    f = read_fetched(data, 0, compacted=True)
    assert f.skips == [] and f.spans == [(0, 4, "read"), (5, 9, "compacted"), (10, 14, "read")]


def test_a_fetch_answered_from_a_later_batch_leaves_the_range_to_the_reader():
    f = read_fetched(batch(40) + batch(45), 27)
    assert f.lead_gap == (27, 39) and f.skips == [] and offsets(f)[0] == 40
    assert f.spans == [(40, 49, "read")] and f.next_offset == 50
    f = read_fetched(batch(40), 27, compacted=True)
    assert f.lead_gap is None and f.spans == [(27, 39, "compacted"), (40, 44, "read")]


def random_log(rng):
    """Batches of random sizes with random gaps, some records compacted out of a batch, control
    batches and a damaged batch or two: what a fetch may hold."""
    parts, base = [], rng.randrange(0, 50)
    for _ in range(rng.randrange(1, 8)):
        base += rng.choice((0, 0, 0, rng.randrange(1, 9)))
        kind = rng.random()
        if kind < 0.15:
            parts.append(control(base, 9, COMMIT))
            base += 1
            continue
        n = rng.randrange(1, 6)
        b = batch(base, n)
        if kind < 0.3:
            b = bytearray(b)
            b[-2] ^= 0x40  # a CRC mismatch
            b = bytes(b)
        parts.append(b)
        base += n
    return b"".join(parts)


@pytest.mark.parametrize("seed", range(300))
def test_every_fetched_offset_is_read_skipped_or_compacted_once(seed):
    """Generated fetches (seed in the test id): the spans meet end to end from the fetch offset to
    the next one, every delivered offset lies in a read span, and the ledger takes the step."""
    from pykbatch.live.ledger import Ledger
    rng = random.Random(seed)
    data = random_log(rng)
    first = next(iter(kb.iter_batches(data, verify_crc=False))).base_offset
    fetch_offset = first + rng.randrange(0, 4)
    cut = rng.randrange(len(data) // 2, len(data) + 1)
    compacted = rng.random() < 0.3
    f = read_fetched(data[:cut], fetch_offset, compacted=compacted)
    ledger = Ledger("t", 0, fetch_offset)
    if f.lead_gap is not None:
        assert f.lead_gap[0] == fetch_offset and not compacted
        ledger.skip(*f.lead_gap)
    ledger.take(f.spans, offsets(f), f.next_offset)
    assert ledger.next == f.next_offset
    gap_skips = [s for s in f.skips if s.rule == "consumer.offset_gap"]
    assert not (compacted and gap_skips)
    assert ledger.delivered == f.table.num_rows


def test_the_ledger_refuses_a_step_that_loses_or_repeats_an_offset():
    from pykbatch.live.ledger import AccountingError, Ledger
    ledger = Ledger("t", 3, 10)
    ledger.take([(10, 14, "read")], [10, 11, 12, 13, 14], 15)
    with pytest.raises(AccountingError, match="offsets 15 to 19 neither delivered"):
        ledger.take([(20, 24, "read")], [20], 25)
    with pytest.raises(AccountingError, match="accounted twice"):
        ledger.take([(12, 16, "read")], [], 17)
    with pytest.raises(AccountingError, match="repeat"):
        ledger.take([(15, 19, "read")], [15, 15], 20)
    ledger = Ledger("t", 3, 15)
    with pytest.raises(AccountingError, match="no batch read"):
        ledger.take([(15, 16, "read"), (17, 19, "skipped")], [15, 18], 20)
    ledger = Ledger("t", 3, 15)
    with pytest.raises(AccountingError, match="no span covers"):
        ledger.take([(15, 16, "read")], [15, 16], 20)
    ledger = Ledger("t", 3, 15)
    ledger.take([(15, 16, "read"), (17, 19, "skipped"), (20, 22, "compacted"), (23, 30, "read")], [15, 23, 24], 31)
    assert (ledger.delivered, ledger.skipped, ledger.compacted, ledger.left_out) == (3, 3, 3, 7)


@pytest.mark.parametrize("servers, said", [("127.0.0.1:1", "connection refused"),
                                           ("no-such-host.invalid:9092", "host not found")])
def test_an_unreachable_bootstrap_server_is_named_within_seconds(servers, said, capsys):
    """Nothing listening there, or no such host: said within a few seconds (it was 30 s of silence,
    then NodeNotReadyError: bootstrap-0) -- by the Reader, the Producer and the command line."""
    import time
    from pykbatch.commands import main
    from pykbatch.live import ClusterError, Producer, Reader
    for make in (lambda: Reader({"bootstrap.servers": servers}, subscribe="t"),
                 lambda: Producer({"bootstrap.servers": servers})):
        start = time.monotonic()
        with pytest.raises(ClusterError, match=said):
            with make() as client:
                client.read() if hasattr(client, "read") else None
        assert time.monotonic() - start < 8.0
    start = time.monotonic()
    assert main(["consume", "--bootstrap-server", servers, "--topic", "t"]) == 2
    assert said in capsys.readouterr().err and time.monotonic() - start < 8.0


def test_a_long_produce_reports_its_progress_while_it_waits():
    """produce_arrow(progress=...): called with how many records have their outcome, rising, until
    every one has (the command line draws its progress line from it)."""
    import threading
    import time
    import types
    import numpy as np
    from pykbatch.live.produced import ProduceReport
    from pykbatch.live.producer import Producer
    report = ProduceReport(6)

    def settle():
        for row in range(6):
            time.sleep(0.15)
            report.delivered(np.array([row]), 0, row)
    seen: list[int] = []
    stub = types.SimpleNamespace(_seal_lingering=lambda force: None)
    worker = threading.Thread(target=settle)
    worker.start()
    assert Producer._finish(stub, report, 10, seen.append) is report
    worker.join()
    assert seen and seen == sorted(seen) and 0 < seen[-1] <= 6 and report.settled == 6


@pytest.mark.parametrize("seed", range(20))
def test_frames_cut_anywhere_arrive_whole_and_in_order(seed):
    """The wire seam's receiver (live/frames.py) reassembles response frames from chunks cut at
    random places -- inside a size, between frames, several frames in one chunk, empty frames --
    and hands each to the parser whole, in order, its body readable as a view."""
    from pykbatch.live import frames

    class Parser:
        def _validate_frame_size(self, n):
            assert 0 <= n < 1 << 20

        def _process_response(self, frame):
            head = frame.read(4)
            return bytes(head) + bytes(frame.read())

    rng = random.Random(seed)
    bodies = [os.urandom(rng.choice((0, 1, 5, 300, 70_000))) for _ in range(rng.randrange(1, 8))]
    wire = b"".join(len(b).to_bytes(4, "big") + b for b in bodies)
    receiver = frames.Receiver(transport=None, parser=Parser())
    got, at = [], 0
    while at < len(wire):
        step = rng.choice((1, 2, 3, 7, 4096, 65_536, 200_000))
        got += receiver.receive_bytes(wire[at:at + step])
        at += step
    assert got == bodies


@pytest.mark.parametrize("version", range(3, 12))
def test_produce_requests_are_written_byte_for_byte_as_the_library_writes_them(version):
    """pykbatch writes Produce itself (live/protocol.produce_frame): for every version it speaks,
    random topics, partitions, batches, acks and transactional ids, the bytes equal those of
    kafka-python's generated encoder."""
    from pykbatch.live import protocol
    rng = random.Random(version)
    for _ in range(20):
        batches = {rng.choice(("t", "orders", "négoce", "x" * 200)) + str(i):
                   [(rng.randrange(1 << 31), os.urandom(rng.choice((0, 1, 61, 5000)))) for _ in range(rng.randrange(1, 4))]
                   for i in range(rng.randrange(1, 4))}
        tid, acks = rng.choice((None, "", "tx-1")), rng.choice((-1, 1))
        cid, client = rng.randrange(1 << 31), rng.choice(("pykbatch", "", None))
        request = protocol.produce(batches, acks=acks, timeout_ms=30_000, transactional_id=tid)
        request.API_VERSION = version
        request.with_header(correlation_id=cid, client_id=client)
        assert protocol.produce_frame(version, cid, client, batches, acks=acks, timeout_ms=30_000,
                                      transactional_id=tid) == bytes(request.encode(framed=True, header=True))


@pytest.mark.parametrize("version", range(3, 12))
def test_produce_answers_are_read_as_the_library_encodes_them(version):
    """read_produce_answer of kafka-python-encoded answers: error codes, KIP-467 record errors,
    messages, KIP-951's tagged leader hints, throttle; cut anywhere it raises ValueError, and a
    changed byte gives an answer or ValueError, never another exception."""
    from kafka.protocol.producer import ProduceResponse as R
    from pykbatch.live import protocol
    T, P = R.TopicProduceResponse, R.TopicProduceResponse.PartitionProduceResponse
    rng = random.Random(100 + version)
    for _ in range(20):
        topics = []
        for t in range(rng.randrange(0, 3)):
            parts = []
            for i in range(rng.randrange(0, 4)):
                errors = [P.BatchIndexAndErrorMessage(batch_index=rng.randrange(100),
                                                      batch_index_error_message=rng.choice((None, "bad", "é")))
                          for _ in range(rng.randrange(0, 3))]
                part = P(index=i, error_code=rng.choice((0, 87, 6, 47)), base_offset=rng.randrange(-1, 1 << 40),
                         log_append_time_ms=rng.choice((-1, 1_700_000_000_000)), log_start_offset=rng.randrange(9),
                         record_errors=errors, error_message=rng.choice((None, "oops")))
                if version >= 10 and rng.random() < 0.5:
                    part.current_leader = P.LeaderIdAndEpoch(leader_id=4, leader_epoch=8)
                parts.append(part)
            topics.append(T(name=f"topic-{t}", partition_responses=parts))
        response = R(responses=topics, throttle_time_ms=rng.randrange(100))
        if version >= 10 and rng.random() < 0.5:
            response.node_endpoints = [R.NodeEndpoint(node_id=4, host="h", port=9, rack=None)]
        response.API_VERSION = version
        cid = rng.randrange(1 << 31)
        response.with_header(correlation_id=cid)
        data = bytes(response.encode(header=True))
        got_cid, throttle, answers = protocol.read_produce_answer(data, version)
        assert got_cid == cid and throttle == response.throttle_time_ms
        # field for field as the library decodes the same bytes (its own reading, not ours)
        theirs = response.decode(data[4 + (version >= 9):], version=version)
        assert answers == [(t.name, p.index, p.error_code, p.base_offset, p.log_append_time_ms,
                            [(e.batch_index, e.batch_index_error_message) for e in p.record_errors or ()],
                            p.error_message if version >= 8 else None)
                           for t in theirs.responses for p in t.partition_responses]
        assert protocol.produce_answer_of(theirs)[1:] == (throttle, answers)  # the library's path: the same
        for cut in range(len(data)):
            with pytest.raises(ValueError):
                protocol.read_produce_answer(data[:cut], version)
        for _ in range(50):  # bytes changed anywhere: an answer or ValueError, nothing else
            bad = bytearray(data)
            bad[rng.randrange(len(bad))] = rng.randrange(256)
            try:
                protocol.read_produce_answer(bytes(bad), version)
            except ValueError:
                pass


def test_answers_to_pykbatchs_own_requests_never_reach_the_librarys_parser():
    """Frames whose correlation id pykbatch expects go to their Answer; the others reach the
    library's parser in order, whatever the interleaving."""
    from pykbatch.live import frames

    class Parser:
        def _validate_frame_size(self, n):
            pass

        def _process_response(self, frame):
            return bytes(frame.read())

    class Conn:
        closed = False

    rng = random.Random(5)
    receiver = frames.Receiver(transport=None, parser=Parser())
    ours, theirs, wire = {}, [], b""
    for cid in range(200):
        body = cid.to_bytes(4, "big") + os.urandom(rng.randrange(0, 50))
        if rng.random() < 0.5:
            ours[cid] = (body, frames.Answer(Conn(), bytes))
            receiver.expect(cid, ours[cid][1])
        else:
            theirs.append(body)
        wire += len(body).to_bytes(4, "big") + body
    got, at = [], 0
    while at < len(wire):
        step = rng.choice((1, 3, 100, 5000))
        got += receiver.receive_bytes(wire[at:at + step])
        at += step
    assert got == theirs and not receiver.expected
    assert all(a.is_done and not a.failed() and a.value == body for body, a in ours.values())
    lost = frames.Answer(Conn(), bytes)
    Conn.closed = True
    assert lost.is_done and lost.failed() and "closed" in str(lost.exception)


@pytest.mark.parametrize("seed", [20261127, 1, 2])
def test_batches_are_filled_greedily_to_batch_size(seed):
    """``batch_ends`` against the formulation by running sums: a batch from row ``start`` ends
    after the last row whose running sum (from ``start``) is within the limit, and after ``start``
    itself at least (a row past the limit goes alone) -- on drawn sizes around the limit."""
    print(f"seed {seed}")
    rng = random.Random(seed)
    for _ in range(200):
        limit = rng.choice([1, 100, 16384 - 61, 1000])
        sizes = np.array([rng.choice([0, 1, limit // 3, limit - 1, limit, limit + 1, rng.randrange(2 * limit + 2)])
                          for _ in range(rng.randrange(0, 60))], dtype=np.int64)
        cum, want, start, base = np.cumsum(sizes), [], 0, 0
        while start < len(sizes):
            end = max(int(np.searchsorted(cum, base + limit, side="right")), start + 1)
            want.append(end)
            base, start = int(cum[end - 1]), end
        assert _native.batch_ends(sizes, limit).tolist() == want


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_records_checked_before_compression_get_the_verdict_of_the_compressed_batch(codec):
    """The producer's pre-flight checks a batch's records uncompressed, then compresses it and
    holds its size to the topic's limits: on drawn records (null keys on compacted topics,
    timestamps either side of the window, sizes either side of max.message.bytes, topics that keep
    the producer's codec or re-encode) it refuses
    exactly the batches the validator refuses in their compressed form, and what it sends is the
    batch the builder makes compressed, byte for byte."""
    import time as _time
    from pykbatch.live.topic_limits import TopicLimits, check, check_before_compression
    seed = 20261127
    print(f"seed {seed}")
    rng = random.Random(seed + len(codec))
    now = int(_time.time() * 1000)
    hour = 3_600_000
    refused = kept = 0
    for _ in range(120):
        records = [{"key": None if rng.random() < 0.05 else b"k%d" % i,
                    "value": bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 10, 300]))) * rng.choice([1, 20]),
                    "timestamp": now + rng.choice([0, -hour, 2 * hour, -10 * hour]) if rng.random() < 0.1 else now}
                   for i in range(rng.randint(1, 12))]
        fields = dict(base_offset=0, producer_id=9, producer_epoch=0, base_sequence=0)
        compressed = kb.build_batch(records, compression=codec, **fields)
        limits = TopicLimits("t", compression=rng.choice(["producer", codec, "gzip", "uncompressed"]),
                             compacted=rng.random() < 0.3, before_max_ms=rng.choice([2 * hour, 1 << 62]),
                             after_max_ms=hour, max_message_bytes=rng.choice([1 << 20, len(compressed),
                                                                               len(compressed) - 1]))
        want = bool(check(compressed, limits.config(0)))
        datas, bad = check_before_compression([kb.build_batch(records, compression="none", **fields)], limits, 0, codec)
        assert (0 in bad) == want, (records, limits)
        if not want:
            assert bytes(datas[0]) == compressed
        refused += want
        kept += not want
    assert refused >= 10 and kept >= 10  # both verdicts drawn


def test_the_transactions_version_follows_the_cluster_and_caps_the_apis():
    """transaction.version 2 finalized and the v2 versions offered: v2; a broker without them, or
    a cluster at 1 or none: v1's requests (Produce below 12, TxnOffsetCommit below 5, EndTxn below
    5); the software version a broker checks stays in its alphabet."""
    import re
    from types import SimpleNamespace as NS

    from pykbatch.live import protocol

    def answer(level, produce=12, end_txn=5):
        keys = [NS(api_key=0, max_version=produce), NS(api_key=28, max_version=5), NS(api_key=26, max_version=end_txn)]
        features = [] if level is None else [NS(name="transaction.version", max_version_level=level)]
        return NS(api_keys=keys, finalized_features=features)
    assert protocol.transaction_version(answer(2)) == 2
    assert protocol.transaction_version(answer(1)) == 1
    assert protocol.transaction_version(answer(None)) == 0
    assert protocol.transaction_version(answer(2, produce=11)) == 1
    assert protocol.transaction_version(answer(2, end_txn=4)) == 1
    assert protocol.produce_range(None) == (3, 12) and protocol.produce_range(2) == (3, 12)
    assert protocol.produce_range(1) == (3, 11) and protocol.produce_range(0) == (3, 11)
    assert protocol._versions("EndTxn", 1)["max_version"] == 4 and protocol._versions("EndTxn", 2)["max_version"] == 5
    assert protocol._versions("TxnOffsetCommit", 0)["max_version"] == 4
    assert protocol._versions("TxnOffsetCommit", 2)["max_version"] == 5
    assert protocol._versions("InitProducerId", 1) == protocol._versions("InitProducerId", 2)
    assert re.fullmatch(r"[a-zA-Z0-9](?:[a-zA-Z0-9.\-]*[a-zA-Z0-9])?", protocol.api_versions().client_software_version)


def test_the_exactly_once_sinks_transactions_are_named_by_query_partition_and_batch():
    from spark_udfs import exactly_once as eo
    assert eo.settings_of({"deliveryGuarantee": "at_least_once"}, None) is None
    assert eo.settings_of({}, "t") is None
    s = eo.settings_of({"DELIVERYGUARANTEE": "Exactly_Once"}, "out")
    assert s == eo.Settings(None, "out")
    t = eo.task_transaction(s, 3, "17", "q-1", streaming=True)
    assert (t.transactional_id, t.group, t.batch_id) == ("pykbatch-q-1-3", "pykbatch-q-1-3", 17)
    named = eo.settings_of({"deliveryGuarantee": "exactly_once", "transactionalIdPrefix": "nightly.2026-11-28"}, "out")
    assert eo.task_transaction(named, 0, None, None, streaming=False) == eo.TaskTransaction("nightly.2026-11-28-0", 0)
    for options, topic, match in (({"deliveryGuarantee": "twice"}, "t", "at_least_once or exactly_once"),
                                  ({"deliveryGuarantee": "exactly_once"}, None, "needs the topic option"),
                                  ({"transactionalIdPrefix": "x"}, "t", "is for deliveryGuarantee=exactly_once"),
                                  ({"deliveryGuarantee": "exactly_once", "transactionalIdPrefix": "a b"}, "t", "letters")):
        with pytest.raises(ValueError, match=match):
            eo.settings_of(options, topic)
    with pytest.raises(ValueError, match="needs transactionalIdPrefix"):
        eo.task_transaction(s, 0, None, None, streaming=False)
    with pytest.raises(RuntimeError, match="no micro-batch id"):
        eo.task_transaction(s, 0, None, "q", streaming=True)


def test_read_process_write_notes_each_source_partitions_next_offset_and_drops_the_column():
    """The sink's source positions: the offset after the highest source record of each
    partition, across batches and out of order; the column kept out of what is produced; a row
    without its source refused; two tasks of one batch on one source partition refused."""
    import pyarrow as pa

    from pykbatch.live import TopicPartition
    from spark_udfs import exactly_once as eo
    from spark_udfs import source_offsets as so
    s = eo.settings_of({"deliveryGuarantee": "exactly_once", "sourceOffsetsGroup": "g"}, "out")
    assert (s.source_group, s.source_column) == ("g", "source")
    assert eo.settings_of({"deliveryGuarantee": "exactly_once", "sourceOffsetsGroup": "g",
                           "sourceOffsetsColumn": "from"}, "out").source_column == "from"
    for options, match in (({"sourceOffsetsGroup": "g"}, "sourceOffsetsGroup is for deliveryGuarantee=exactly_once"),
                           ({"deliveryGuarantee": "exactly_once", "sourceOffsetsColumn": "c"}, "is for sourceOffsetsGroup"),
                           ({"deliveryGuarantee": "exactly_once", "sourceOffsetsGroup": " "}, "names a consumer group")):
        with pytest.raises(ValueError, match=match):
            eo.settings_of(options, "out")

    def batch(rows, column="source"):
        source = pa.array([None if r is None else {"topic": r[0], "partition": r[1], "offset": r[2]} for r in rows],
                          pa.struct([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64())]))
        return pa.RecordBatch.from_arrays([pa.array([b"v"] * len(rows)), source], ["value", column])

    positions = so.SourcePositions("source")
    out = positions.take(batch([("a", 0, 7), ("a", 1, 3), ("a", 0, 5)]))
    assert out.schema.names == ["value"] and out.num_rows == 3
    positions.take(batch([("a", 0, 6), ("b", 0, 0)]))  # lower than seen: the highest stays
    positions.take(batch([]))
    assert positions.reached == {TopicPartition("a", 0): 8, TopicPartition("a", 1): 4, TopicPartition("b", 0): 1}
    with pytest.raises(ValueError, match="is null"):
        so.SourcePositions("source").take(batch([("a", 0, 1), None]))
    with pytest.raises(ValueError, match="needs the column 'source'"):
        so.SourcePositions("source").take(batch([("a", 0, 1)], column="src"))
    with pytest.raises(TypeError, match="struct<topic"):
        so.SourcePositions("value").take(batch([("a", 0, 1)]))
    so.one_task_per_partition([{TopicPartition("a", 0): 8}, {TopicPartition("a", 1): 4}])
    with pytest.raises(RuntimeError, match="source partition a-0 was written by two tasks of one batch"):
        so.one_task_per_partition([{TopicPartition("a", 0): 8}, {TopicPartition("a", 0): 9}])


def test_the_copys_offset_map_runs_and_translation():
    """runs_of cuts where either log skips an offset; translate sends a consumer of A to the first
    copied record at or after its offset (inside a damaged range: the record after it)."""
    import numpy as np

    from pykbatch.live.copy import OffsetMap, runs_of
    a = np.array([0, 1, 2, 5, 6, 7, 8, 20], np.int64)    # A: 3-4 skipped, 9-19 gone
    b = np.array([0, 1, 2, 3, 4, 6, 7, 8], np.int64)     # B: a commit marker at 5
    runs = runs_of(a, b)
    assert runs == [[0, 0, 3], [5, 3, 2], [7, 6, 2], [20, 8, 1]]
    assert runs_of(np.zeros(0, np.int64), np.zeros(0, np.int64)) == []
    m = OffsetMap("a", "b", {0: [tuple(r) for r in runs]})
    assert [m.translate(0, x) for x in (0, 2, 3, 4, 5, 6, 7, 8, 9, 19, 20, 21, 99)] == \
        [0, 2, 3, 3, 3, 4, 6, 7, 8, 8, 8, 9, 9]
    assert m.translate(1, 5) is None  # nothing of partition 1 copied


def test_a_copys_running_counts_travel_in_its_commit_metadata_and_a_foreign_group_is_refused():
    from pykbatch.live.copy import CopyError, PartitionCopy, _counts
    c = PartitionCopy(0, 10, 50, copied=35, skips=2, skipped=5, refused=1)
    assert _counts(c.metadata("B"), "name", "B") == {"copied": 35, "skips": 2, "skipped": 5, "refused": 1}
    with pytest.raises(CopyError, match="not 'C'"):
        _counts(c.metadata("B"), "name", "C")
    for foreign in ("", "consumer's note", '{"x": 1}'):
        with pytest.raises(CopyError, match="no copy committed"):
            _counts(foreign, "name", "B")


def test_the_classic_assignors_on_drawn_groups_as_kafkas_own_promise():
    """range and cooperative-sticky on drawn groups (members, topics, subscriptions, what each
    owns and since which generation): every partition of a subscribed topic to at most one member
    that subscribes to it; range as Kafka's RangeAssignor lays it out; cooperative-sticky balanced
    within one where the members subscribe alike, keeps an owner's partitions up to its share,
    and never gives a partition to a member while another still owns it -- and a second round,
    once the owners gave up what moved, places everything.  Seed printed; PYKBATCH_ASSIGN_SEED."""
    import os
    import random

    from pykbatch.live.assignors import Subscription, cooperative_sticky_assign, range_assign
    from pykbatch.live.cluster import TopicPartition
    seed = int(os.environ.get("PYKBATCH_ASSIGN_SEED", random.randrange(2**32)))
    print(f"PYKBATCH_ASSIGN_SEED={seed}")
    rng = random.Random(seed)
    for trial in range(300):
        topics = {f"t{i}": rng.randint(1, 12) for i in range(rng.randint(1, 3))}
        alike = rng.random() < 0.6
        names = [f"m{rng.randrange(10**6):06d}" for _ in range(rng.randint(1, 6))]
        members = {m: Subscription(sorted(topics) if alike else sorted(rng.sample(sorted(topics), rng.randint(1, len(topics)))))
                   for m in names}
        everything = [TopicPartition(t, p) for t, n in topics.items() for p in range(n)]
        where = (seed, trial, topics, {m: s.topics for m, s in members.items()})
        ranged = range_assign(members, topics)
        got = [tp for ps in ranged.values() for tp in ps]
        assert sorted(got) == sorted(tp for tp in everything if any(tp.topic in s.topics for s in members.values())), where
        for t, n in topics.items():  # Kafka's layout: contiguous runs in member order, the first n % m one longer
            takers = sorted(m for m, s in members.items() if t in s.topics)
            if not takers:
                continue
            runs = [[tp.partition for tp in ranged[m] if tp.topic == t] for m in takers]
            assert [p for run in runs for p in run] == list(range(n)) and \
                [len(r) for r in runs] == sorted((len(r) for r in runs), reverse=True), where
        # cooperative-sticky from a drawn earlier round: owners (some stale, some shared), then again
        for m, s in members.items():
            mine = [tp for tp in everything if tp.topic in s.topics and rng.random() < 0.4]
            s.owned, s.generation = mine, rng.choice([3, 3, 3, 2])
        claims = {}
        for m, s in members.items():
            for tp in s.owned:
                claims.setdefault(tp, []).append((s.generation, m))
        first = cooperative_sticky_assign(members, topics)
        given = [tp for ps in first.values() for tp in ps]
        assert len(given) == len(set(given)), where
        for m, ps in first.items():
            assert all(tp.topic in members[m].topics for tp in ps), where
            for tp in ps:  # never to a new owner while the rightful owner (newest claim) still holds it
                newest = sorted(claims.get(tp, []), reverse=True)
                assert not newest or newest[0][1] == m or (len(newest) > 1 and newest[0][0] == newest[1][0]), where
        # round two: each member owns what it was given (it gave up the rest); everything placed
        for m, s in members.items():
            s.owned, s.generation = list(first[m]), 4
        second = cooperative_sticky_assign(members, topics)
        placed = sorted(tp for ps in second.values() for tp in ps)
        assert placed == sorted(tp for tp in everything if any(tp.topic in s.topics for s in members.values())), where
        assert all(set(first[m]) <= set(second[m]) or len(second[m]) <= len(first[m]) for m in members), where
        if alike:
            sizes = [len(ps) for ps in second.values()]
            assert max(sizes) - min(sizes) <= 1, (where, second)


def test_a_classic_subscription_and_assignment_read_back_as_written():
    from pykbatch.live.classic_group import (decode_assignment, decode_subscription, encode_assignment,
                                             encode_subscription, strategies_of)
    from pykbatch.live.cluster import TopicPartition
    owned = [TopicPartition("a", 2), TopicPartition("b", 0), TopicPartition("a", 0)]
    s = decode_subscription(encode_subscription(["b", "a"], owned, 7), -1)
    assert (s.topics, sorted(s.owned), s.generation) == (["a", "b"], sorted(owned), 7)
    assert decode_assignment(encode_assignment(owned)) == frozenset(owned) and decode_assignment(b"") == frozenset()
    assert strategies_of("org.apache.kafka.clients.consumer.CooperativeStickyAssignor, range") == \
        ["cooperative-sticky", "range"]
