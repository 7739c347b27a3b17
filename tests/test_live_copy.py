"""``pykbatch copy`` against the session broker: a topic with damaged segments and an aborted
transaction, copied by a command SIGKILLed at drawn points and restarted; what the copy must
hold is computed from what the test's producers wrote (their offsets as the broker acknowledged
them) and the damage plan, and read back with librdkafka.  Seed: PYKBATCH_COPY_SEED."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

import pytest

from tests.live_damage import (
    batches_on_disk,
    create_topic,
    damage,
    wait_until_served,
)

pytestmark = pytest.mark.usefixtures("kafka_broker")
ck = pytest.importorskip("confluent_kafka")

PARTITIONS = 3
BATCHES = 30  # per partition, of 20 records
BATCH = 20
RETENTION_MS = 30 * 86_400_000  # set on the source: its copy is created with it
T0 = (int(time.time()) - 3600) * 1000  # an hour ago: records older than retention.ms go with their segment


def value(p: int, i: int) -> bytes | None:
    """Record ``i`` of partition ``p`` (None: a tombstone, every 37th)."""
    return None if i % 37 == 5 else b"p%d-r%05d " % (p, i) + bytes((i * 13 + j) % 251 for j in range(40))


def key(p: int, i: int) -> bytes | None:
    return None if i % 9 == 4 and value(p, i) is not None else b"key-%d-%d" % (p, i)


def headers(p: int, i: int) -> list:
    return [("n", b"%d" % i), ("p", b"%d" % p)] + ([("n", b"again")] if i % 5 == 0 else [])


@dataclass
class Source:
    topic: str
    seed: int
    written: dict = field(default_factory=dict)  # partition -> [(offset, i)] of committed records, as acknowledged
    aborted: dict = field(default_factory=dict)  # partition -> offsets of aborted records
    unreadable: dict = field(default_factory=dict)  # partition -> offsets the damage made unreadable
    damaged: list = field(default_factory=list)  # (partition, OnDisk, how, kwargs)

    def expected(self, p: int) -> list[tuple[int, int]]:
        """(A offset, record number) of what the copy must hold of partition ``p``, in order."""
        return [(o, i) for o, i in self.written[p] if o not in self.unreadable[p]]


def _produce(bootstrap: str, source: Source) -> None:
    """Batches of 20 (every third lz4), explicit timestamps and headers; in partition 1 an aborted
    transaction of confluent-kafka's between two committed stretches."""
    from kafka import KafkaProducer
    plain = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=10_000, batch_size=1 << 20, acks="all")
    packed = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=10_000, batch_size=1 << 20, acks="all",
                           compression_type="lz4")
    for p in range(PARTITIONS):
        source.written[p], source.aborted[p] = [], []
    for b in range(BATCHES):
        for p in range(PARTITIONS):
            producer = packed if b % 3 == 2 else plain
            futures = [(i, producer.send(source.topic, key=key(p, i), value=value(p, i), partition=p,
                                         headers=headers(p, i), timestamp_ms=T0 + 1000 * i + p))
                       for i in range(b * BATCH, (b + 1) * BATCH)]
            producer.flush()
            source.written[p] += [(f.get(30).offset, i) for i, f in futures]
        if b == BATCHES // 2:  # an aborted transaction in partition 1
            txn = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{source.topic}-aborter",
                               "linger.ms": 5})
            txn.init_transactions(30)
            txn.begin_transaction()
            acked = []
            for j in range(30):
                txn.produce(source.topic, value=b"aborted %d" % j, partition=1,
                            on_delivery=lambda err, m, acked=acked: acked.append(m.offset()))
            txn.flush(30)
            txn.abort_transaction(30)
            source.aborted[1] = acked
    plain.close()
    packed.close()


def _damage(broker, source: Source, rng: random.Random) -> None:
    """Stops the broker, damages 1-3 drawn batches of closed segments in partitions 0 and 2 (and
    maybe 1), at most one per segment, each a kind the reader must get past; starts it again."""
    broker.stop()
    try:
        for p in range(PARTITIONS):
            source.unreadable[p] = set()
            if p == 1 and rng.random() < 0.5:
                continue
            on_disk = [b for b in batches_on_disk(broker.data / f"{source.topic}-{p}")]
            last = max(b.path for b in on_disk)
            used_segments = set()
            wanted = rng.randint(1, 3)
            for _ in range(200):  # draws until ``wanted`` batches are damaged (each a closed segment's)
                if sum(d[0] == p for d in source.damaged) >= wanted:
                    break
                i = rng.randrange(1, len(on_disk) - 1)
                b = on_disk[i]
                prev, nxt = on_disk[i - 1], on_disk[i + 1]
                if b.is_control or b.path == last or b.path in used_segments:
                    continue
                inside = prev.path == b.path == nxt.path and not prev.is_control and not nxt.is_control
                # a record's length is a byte of the batch only when it is not compressed
                kinds = ["flip"] + (["codec"] if b.compression != "none" else ["length"]) \
                    + (["garbage", "zeros"] if inside else [])
                # partition 0 starts with a zeroed batch where it can: a fetch of the batch after it is
                # refused (the broker's scan from its index meets the zeros), small fetches stop there
                first_here = not any(d[0] == p for d in source.damaged)
                how = "zeros" if p == 0 and first_here and inside else rng.choice(kinds)
                kwargs: dict = {}
                if how == "length":
                    kwargs["record"] = rng.randrange(0, BATCH)
                elif how == "garbage":
                    kwargs["seed"] = rng.randrange(1 << 30)
                damage(b, how, **kwargs)
                used_segments.add(b.path)
                source.damaged.append((p, b, how, kwargs))
                source.unreadable[p] |= set(range(b.base_offset + kwargs.get("record", 0), b.last_offset + 1))
    finally:
        broker.start()
    wait_until_served(broker.bootstrap, source.topic)


@pytest.fixture(scope="module")
def source(kafka_broker):
    seed = int(os.environ.get("PYKBATCH_COPY_SEED", random.randrange(1 << 32)))
    print(f"PYKBATCH_COPY_SEED={seed}")
    src = Source(f"copy-src-{seed}-{int(time.time())}", seed)
    create_topic(kafka_broker.bootstrap, src.topic, PARTITIONS, **{"internal.segment.bytes": 16384,
                                                                    "retention.ms": RETENTION_MS})
    _produce(kafka_broker.bootstrap, src)
    _damage(kafka_broker, src, random.Random(seed))
    print("damage:", [(p, b.base_offset, how, kw) for p, b, how, kw in src.damaged])
    return src


def _command(bootstrap: str, *args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from pykbatch.commands import main; sys.exit(main())", "copy",
            "--bootstrap-server", bootstrap, *args]


def _killed_at(cmd: list[str], commits: int, delay: float) -> str:
    """Runs ``cmd`` until its ``commits``-th transaction is committed, then ``delay`` seconds more,
    then SIGKILL; what it printed."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen, lines = 0, []
    try:
        for line in proc.stderr:
            lines.append(line)
            if "committed" in line:
                seen += 1
                if seen >= commits:
                    time.sleep(delay)
                    proc.send_signal(signal.SIGKILL)
                    break
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, f"the copy ended before it was killed: {''.join(lines)[-2000:]}"
    return "".join(lines)


def _read_all(bootstrap: str, topic: str, partitions: int) -> dict[int, list]:
    """Every record of ``topic`` under read_committed (librdkafka), by partition, in order."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}-{time.time()}",
                     "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                     "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
    out: dict[int, list] = {p: [] for p in range(partitions)}
    eof: set[int] = set()
    deadline = time.monotonic() + 60
    while len(eof) < partitions and time.monotonic() < deadline:
        m = c.poll(1)
        if m is None:
            continue
        if m.error():
            if m.error().code() == ck.KafkaError._PARTITION_EOF:
                eof.add(m.partition())
                continue
            raise AssertionError(m.error())
        out[m.partition()].append(m)
    c.close()
    assert len(eof) == partitions, f"{topic} not read to its end"
    return out


def check_copy(source: Source, got: dict[int, list]) -> None:
    """B holds each readable record of A once, in A's order per partition, as it was written."""
    for p in range(PARTITIONS):
        want = source.expected(p)
        have = got[p]
        if len(have) != len(want):
            seen = [m.value() for m in have]
            missing = [o for o, i in want if value(p, i) not in seen]
            raise AssertionError(f"partition {p}: {len(have)} records, not {len(want)}: duplicated or missing "
                                 f"records (A offsets missing: {missing[:40]})")
        for (offset, i), m in zip(want, have):
            assert m.value() == value(p, i), (p, offset, i)
            assert m.key() == key(p, i), (p, offset, i)
            assert [(k, v) for k, v in (m.headers() or [])] == headers(p, i), (p, offset, i)
            assert m.timestamp() == (ck.TIMESTAMP_CREATE_TIME, T0 + 1000 * i + p), (p, offset, i)


def test_a_damaged_topic_copied_by_a_command_killed_three_times_holds_each_readable_record_once(
        kafka_broker, source):
    from pykbatch.live.copy import OffsetMap
    from tests import kafka_tools
    bs = kafka_broker.bootstrap
    rng = random.Random(source.seed + 1)
    dest = f"{source.topic}-copy"
    args = ["--from-topic", source.topic, "--to-topic", dest, "--commit-interval-ms", "100",
            "--max-transaction-records", str(rng.choice([20, 40, 60])),
            "--consumer-property", f"max.partition.fetch.bytes={rng.choice([1024, 2048, 4096])}"]
    for kill in range(3):
        commits, delay = rng.randint(1, 2), rng.choice([0.0, 0.0, 0.005, 0.02, 0.06])
        print(f"kill {kill}: after commit {commits} + {delay} s")
        _killed_at(_command(bs, *args), commits, delay)
    done = subprocess.run(_command(bs, *args, "--json", "--quiet"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr  # the copy met damage: never "ok", even in a run after it
    report = json.loads(done.stdout)
    assert report["resumed"] and not report["ok"]

    got = _read_all(bs, dest, PARTITIONS)
    check_copy(source, got)

    # every copied record's A offset maps to where it is in B
    offset_map = OffsetMap.read({"bootstrap.servers": bs}, source.topic, dest)
    for p in range(PARTITIONS):
        for (a, _), m in zip(source.expected(p), got[p]):
            assert offset_map.translate(p, a) == m.offset(), (p, a, m.offset())
        for a in source.unreadable[p]:  # a consumer inside a damaged range goes on at the next record
            nxt = next((i for i, (o, _) in enumerate(source.expected(p)) if o > a), None)
            want = got[p][nxt].offset() if nxt is not None else got[p][-1].offset() + 1
            assert offset_map.translate(p, a) == want, (p, a)

    # the damage named and dead-lettered once per range, across the runs
    letters = _read_all(bs, f"{source.topic}-dead-letters", 1)[0]
    ranges: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
    for m in letters:
        h = dict(m.headers())
        assert h["__connect.errors.topic"] == source.topic.encode()
        ranges[int(h["__connect.errors.partition"])].append((int(h["__connect.errors.offset"]),
                                                             int(h["__pykbatch.errors.last.offset"])))
    for p in range(PARTITIONS):
        spans = sorted(ranges[p])
        assert all(a[1] < b[0] for a, b in zip(spans, spans[1:])), (p, spans, "a range dead-lettered twice")
        covered = {o for first, last in spans for o in range(first, last + 1)}
        written = {o for o, _ in source.written[p]}  # (a damaged aborted batch is skipped too)
        assert covered & written == source.unreadable[p] & written, (p, spans)
    parts = {p["partition"]: p for p in report["partitions"]}
    assert sum(p["copied"] for p in parts.values()) == sum(len(source.expected(p)) for p in range(PARTITIONS))
    assert sum(p["skips"] for p in parts.values()) == sum(len(r) for r in ranges.values())

    # B was created with what is set on A
    from confluent_kafka.admin import AdminClient, ConfigResource
    resource = ConfigResource(ConfigResource.Type.TOPIC, dest)
    admin = AdminClient({"bootstrap.servers": bs})  # kept alive until its answer is in
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["retention.ms"].value == str(RETENTION_MS)

    # the copy's group sits at A's end, and nothing of the copy is left open
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": f"pykbatch-copy-{source.topic}-{dest}"})
    ends = [c.get_watermark_offsets(ck.TopicPartition(source.topic, p), timeout=30)[1] for p in range(PARTITIONS)]
    committed = c.committed([ck.TopicPartition(source.topic, p) for p in range(PARTITIONS)], timeout=30)
    c.close()
    assert [t.offset for t in committed] == ends
    assert kafka_tools.open_transactions(bs, "pykbatch-copy-") == []
    assert kafka_tools.describe_transaction(bs, f"pykbatch-copy-{source.topic}-{dest}")["state"] in (
        "CompleteCommit", "Empty")

    # a run after the end copies nothing and still says the copy met damage
    again = subprocess.run(_command(bs, *args, "--json"), capture_output=True, text=True, timeout=120)
    assert again.returncode == 1 and json.loads(again.stdout)["transactions"] == 0
    assert [len(v) for v in _read_all(bs, dest, PARTITIONS).values()] == [len(got[p]) for p in range(PARTITIONS)]


@pytest.mark.parametrize("fetch_bytes", [1024, 2048, 4096, 1 << 20])
def test_the_reader_delivers_every_readable_record_of_the_source_whatever_its_fetch_size(kafka_broker, source,
                                                                                          fetch_bytes):
    """The copy's reader alone, against the plan: small fetches used to lose the sound batch after a
    zeroed one (the broker refuses every fetch of it; only a fetch from before the zeros, large
    enough to run past them, carries it: Probe.crossing)."""
    from pykbatch.live import Reader, records_of
    from pykbatch.policy import ErrorPolicy
    with Reader({"bootstrap.servers": kafka_broker.bootstrap}, subscribe=source.topic, starting_offsets="earliest",
                ending_offsets="latest", isolation_level="read_committed", policy=ErrorPolicy(tolerance="all"),
                max_partition_fetch_bytes=fetch_bytes) as reader:
        rows = records_of(reader.read())
        skipped = {(s.partition, o) for s in reader.skips for o in range(s.first_offset, s.last_offset + 1)}
    for p in range(PARTITIONS):
        got = [(r.offset, r.value) for r in rows if r.partition == p]
        want = [(o, value(p, i)) for o, i in source.expected(p)]
        assert got == want, (p, "extra:", [o for o, _ in sorted(set(got) - set(want))][:40], "missing:",
                             [o for o, _ in sorted(set(want) - set(got))][:40], [s.line() for s in reader.skips])
        written = {o for o, _ in source.written[p]}
        assert {o for q, o in skipped if q == p} & written == source.unreadable[p] & written, p


def test_the_checker_finds_a_duplicate_and_a_reordering(kafka_broker, source):
    """check_copy has teeth: the copy of a copy run twice under two names fails it."""
    bs = kafka_broker.bootstrap
    dest = f"{source.topic}-twice"
    for name in ("one", "two"):
        subprocess.run(_command(bs, "--from-topic", source.topic, "--to-topic", dest, "--name", f"{dest}-{name}",
                                "--quiet"), capture_output=True, timeout=300)
    got = _read_all(bs, dest, PARTITIONS)
    with pytest.raises(AssertionError, match="duplicated or missing"):
        check_copy(source, got)
    once = {p: got[p][:len(source.expected(p))] for p in range(PARTITIONS)}
    check_copy(source, once)
    swapped = {p: list(v) for p, v in once.items()}
    swapped[0][0], swapped[0][1] = swapped[0][1], swapped[0][0]
    with pytest.raises(AssertionError):
        check_copy(source, swapped)


def test_consumers_stuck_on_a_damaged_range_move_over_with_their_group(kafka_broker, source, transaction_version):
    """A group stuck at the first damaged range, and one in the middle of a partition, move to B:
    their consumers go on at the first record after where they were, under both transaction versions."""
    from pykbatch.live.copy import move_group
    bs = kafka_broker.bootstrap
    dest = f"{source.topic}-moved-v{transaction_version}"
    p, stuck = next((p, min(u)) for p, u in source.unreadable.items() if u)
    middle = source.written[(p + 1) % PARTITIONS][len(source.written[(p + 1) % PARTITIONS]) // 2][0]
    group = f"stuck-{dest}"
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": group})
    c.commit(offsets=[ck.TopicPartition(source.topic, p, stuck),
                      ck.TopicPartition(source.topic, (p + 1) % PARTITIONS, middle)], asynchronous=False)
    c.close()
    from pykbatch.live.copy import CopyError, copy_topic
    with pytest.raises(CopyError, match="has not reached"):  # before the copy: refused, nothing moved
        copy_topic({"bootstrap.servers": bs}, source.topic, dest, max_transaction_records=20, commit_interval_ms=1,
                   consumer={"max.partition.fetch.bytes": 1024}, stop=_after(1))
        move_group({"bootstrap.servers": bs}, group, source.topic, dest)
    done = subprocess.run(_command(bs, "--from-topic", source.topic, "--to-topic", dest, "--move-group", group,
                                   "--quiet"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert f"group {group} moved to {dest}" in done.stdout
    reader = ck.Consumer({"bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed",
                          "enable.auto.commit": False})
    reader.assign([ck.TopicPartition(dest, q) for q in (p, (p + 1) % PARTITIONS)])  # from the group's commits
    first: dict[int, bytes] = {}
    deadline = time.monotonic() + 60
    while len(first) < 2 and time.monotonic() < deadline:
        m = reader.poll(1)
        if m is not None and not m.error():
            first.setdefault(m.partition(), m.value())
    reader.close()
    for q, at in ((p, stuck), ((p + 1) % PARTITIONS, middle)):
        want = next(i for o, i in source.expected(q) if o >= at)
        assert first[q] == value(q, want), (q, at)


def _after(n: int):
    """A ``stop`` for copy_topic: True once asked ``n`` times."""
    asked = [0]

    def stop() -> bool:
        asked[0] += 1
        return asked[0] > n
    return stop


def test_the_copy_command_on_what_a_new_user_gets_wrong(kafka_broker, source, tmp_path):
    bs = kafka_broker.bootstrap
    missing = subprocess.run(_command(bs, "--from-topic", "no-such-topic", "--to-topic", "x"), capture_output=True,
                             text=True, timeout=120)
    assert missing.returncode == 2 and "no-such-topic" in missing.stderr and "Traceback" not in missing.stderr
    narrow = f"{source.topic}-narrow"
    create_topic(bs, narrow, 1)
    fewer = subprocess.run(_command(bs, "--from-topic", source.topic, "--to-topic", narrow), capture_output=True,
                           text=True, timeout=120)
    assert fewer.returncode == 2 and "fewer than the source's 3" in fewer.stderr, fewer.stderr
    same = subprocess.run(_command(bs, "--from-topic", source.topic, "--to-topic", source.topic), capture_output=True,
                          text=True, timeout=120)
    assert same.returncode == 2 and "four topics" in same.stderr
    bad = subprocess.run(_command(bs, "--from-topic", source.topic, "--to-topic", "y", "--commit-interval-ms", "0"),
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--commit-interval-ms" in bad.stderr
    # a name that copied elsewhere is not resumed into another topic
    first = subprocess.run(_command(bs, "--from-topic", source.topic, "--to-topic", f"{source.topic}-n1", "--name",
                                    f"{source.topic}-named", "--quiet"), capture_output=True, text=True, timeout=300)
    assert first.returncode == 1, first.stderr
    other = subprocess.run(_command(bs, "--from-topic", source.topic, "--to-topic", f"{source.topic}-n2", "--name",
                                    f"{source.topic}-named"), capture_output=True, text=True, timeout=120)
    assert other.returncode == 2 and "name this copy otherwise" in other.stderr, other.stderr
    nowhere = subprocess.run(_command("127.0.0.1:1", "--from-topic", "a", "--to-topic", "b"), capture_output=True,
                             text=True, timeout=120)
    assert nowhere.returncode == 2 and "Traceback" not in nowhere.stderr, nowhere.stderr


def test_the_pages_examples_run_against_the_broker(kafka_broker, source, capsys):
    """docs/copy.md's Python examples, in order: its "payments" is the damaged source."""
    from tests.test_docs import blocks
    bs = kafka_broker.bootstrap
    group = f"billing-{source.topic}"
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": group})
    c.commit(offsets=[ck.TopicPartition(source.topic, 0, 25)], asynchronous=False)
    c.close()
    namespace: dict = {}
    for code in blocks("copy.md", "python"):
        code = code.replace("localhost:9092", bs).replace("payments", source.topic).replace('"billing"', repr(group))
        exec(compile(code, "docs/copy.md", "exec"), namespace)
    assert namespace["report"].ok is False and namespace["report"].to_topic == f"{source.topic}-repaired"
    moved = namespace["moved"]
    assert moved[0] == (25, namespace["offsets"].translate(0, 25))
    assert "records copied" in capsys.readouterr().out


def test_a_second_copy_under_the_name_fences_the_first_and_a_signal_ends_one_cleanly(kafka_broker, source):
    """A copy started under the name of one still running (--follow) fences it: the older one stops
    at its next write (status 2, named, no traceback) and the destination holds each record once;
    --follow ends on SIGTERM after its transaction, with the copy's verdict."""
    from kafka import KafkaProducer
    bs = kafka_broker.bootstrap
    src, dest = f"{source.topic}-live", f"{source.topic}-fenced"
    create_topic(bs, src, PARTITIONS)
    writer = KafkaProducer(bootstrap_servers=bs, acks="all")
    for i in range(600):
        writer.send(src, key=b"k%d" % i, value=b"v%d" % i, partition=i % PARTITIONS)
    writer.flush()
    args = ["--from-topic", src, "--to-topic", dest, "--commit-interval-ms", "100",
            "--max-transaction-records", "20", "--consumer-property", "max.partition.fetch.bytes=1024"]
    first = subprocess.Popen(_command(bs, *args, "--follow"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        for line in first.stderr:
            if "committed" in line:
                break
        second = subprocess.run(_command(bs, *args, "--quiet"), capture_output=True, text=True, timeout=300)
        assert second.returncode == 0, second.stderr  # done, nothing damaged
        writer.send(src, key=b"late", value=b"late", partition=0)  # the older copy wakes to write it: fenced
        writer.flush()
        out, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 2 and "Traceback" not in err and "pykbatch copy: error:" in err, err
    assert "fenced: another copy under the name" in err or "EndTxn" in err, err
    got = _read_all(bs, dest, PARTITIONS)
    assert sorted(m.value() for v in got.values() for m in v) == sorted(b"v%d" % i for i in range(600))
    # a copy following the source ends on SIGTERM after its transaction, saying what it found
    follower = subprocess.Popen(_command(bs, "--from-topic", source.topic, "--to-topic", f"{source.topic}-follow",
                                         "--follow"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in follower.stderr:  # its first transaction committed: the signal handler is in place
        seen.append(line)
        if "committed" in line:
            break
    follower.send_signal(signal.SIGTERM)
    out, err = follower.communicate(timeout=60)
    err = "".join(seen) + err
    assert follower.returncode == 1, err  # the source's damage, named
    assert "stopping after this transaction" in err and "range(s) skipped" in out, out
    check_copy(source, _read_all(bs, f"{source.topic}-follow", PARTITIONS))
    writer.close()
