"""pykbatch's Reader in a KIP-848 consumer group on the session broker, over a six-partition topic
with damaged batches in two partitions (tests/live_damage.py: GROUP_PLAN): members as separate
processes (tests/live_group_member.py), one SIGKILLed mid-stream at a drawn moment and one added;
every readable record delivered, each damaged range reported once for the group, the group's
commits and members as Kafka's own kafka-consumer-groups shows them; librdkafka's group consumer
on the same topic as the contrast."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests import kafka_tools
from tests.live_damage import BATCH, GROUP_BATCHES, GROUP_PARTITIONS, GROUP_TOPIC

MEMBER = Path(__file__).with_name("live_group_member.py")
END = GROUP_BATCHES * BATCH  # each partition's log end


# each member's pause after a poll, and a batch or so per partition a fetch: the group reads for
# seconds, so the kill lands mid-stream
PACE_S = "0.2"


def _start(bootstrap: str, group: str, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(MEMBER), bootstrap, group, GROUP_TOPIC, str(out), PACE_S,
                             "max.partition.fetch.bytes=2048", *extra],
                            cwd=Path(__file__).parent.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _lines(out: Path) -> list[dict]:
    return [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []


def _delivered(outs) -> list[tuple[int, int]]:
    return [tuple(d) for out in outs for line in _lines(out) for d in line.get("delivered", ())]


def _describe(bootstrap: str, group: str, *what: str) -> list[list[str]]:
    lines = kafka_tools.java("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server",
                             bootstrap, "--describe", "--group", group, *what, timeout=120).stdout.splitlines()
    return [line.split() for line in lines if line.split()[:1] == [group]]


def _wait(what, timeout: float, why: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"{why} within {timeout:.0f} s")


@pytest.mark.parametrize("group_protocol", ["consumer", "classic"])
def test_a_group_killed_and_grown_delivers_every_readable_record_and_reports_each_damage_once(live_damaged, tmp_path,
                                                                                           group_protocol):
    """Three members (KIP-848's protocol, or the classic one with a drawn assignor), one SIGKILLed
    at a drawn amount read, one added: every readable record delivered (again only where the
    killed member had read past its last commit), each damaged range reported by one member once
    (whoever met it again skipped it quietly), the commits at every partition's end and each
    living member holding what its callbacks say, as kafka-consumer-groups shows.  Seed printed;
    PYKBATCH_GROUP_SEED repeats a run."""
    broker = live_damaged.broker
    if kafka_tools.unavailable():
        pytest.skip(kafka_tools.unavailable())
    seed = int(os.environ.get("PYKBATCH_GROUP_SEED", random.randrange(2**32)))
    print(f"PYKBATCH_GROUP_SEED={seed}")
    rng = random.Random(seed)
    group = f"pykbatch-group-{group_protocol}-{seed}"
    extra = () if group_protocol == "consumer" else (
        "group.protocol=classic", "session.timeout.ms=6000", "heartbeat.interval.ms=500",
        f"partition.assignment.strategy={rng.choice(['range', 'cooperative-sticky'])}")
    unreadable = live_damaged.group_unreadable()
    readable = {(p, o) for p in range(GROUP_PARTITIONS) for o in range(END) if o not in unreadable.get(p, ())}
    outs = [tmp_path / f"member{i}.jsonl" for i in range(4)]
    members = [_start(broker.bootstrap, group, outs[i], *extra) for i in range(3)]
    try:
        # three members share the six partitions before one is killed, at a drawn amount read
        _wait(lambda: sum(any(line.get("callback") == "assigned" for line in _lines(o)) for o in outs[:3]) == 3,
              60, "three members never all held partitions")
        read = len(set(_delivered(outs)))
        kill_at = read + rng.randrange(0, max(1, (len(readable) - read) // 2))
        _wait(lambda: len(set(_delivered(outs))) >= kill_at, 60, f"the group never read {kill_at} records")
        assert len(set(_delivered(outs))) < len(readable), "the kill lands mid-stream"
        victim = rng.randrange(3)
        members[victim].send_signal(signal.SIGKILL)
        members[victim].wait(10)
        members.append(_start(broker.bootstrap, group, outs[3], *extra))
        _wait(lambda: set(_delivered(outs)) >= readable, 120, "the group never delivered every readable record")
        # the commits reach every partition's end (damage committed past); Kafka's tool says so
        ends = _wait(lambda: (rows := _describe(broker.bootstrap, group)) and len(rows) == GROUP_PARTITIONS
                     and all(r[3] == r[4] == str(END) for r in rows) and rows, 60,
                     "the group's commits never reached every partition's end")
        assert sorted((int(r[2]), int(r[3]), int(r[4]), int(r[5])) for r in ends) == \
            [(p, END, END, 0) for p in range(GROUP_PARTITIONS)]
        # the members the tool names hold what their callbacks said they hold
        alive = [i for i in range(4) if i != victim]
        ids = {_lines(outs[i])[0]["member"]: i for i in alive}

        def held(i):
            now = set()
            for line in _lines(outs[i]):
                if line.get("callback") == "assigned":
                    now |= set(line["partitions"])
                elif line.get("callback") in ("revoked", "lost"):
                    now -= set(line["partitions"])
            return now

        def agree():
            rows = _describe(broker.bootstrap, group, "--members", "--verbose")
            # GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS CURRENT-EPOCH CURRENT-ASSIGNMENT (topic:0,1) ...
            tool = {r[1]: r[6] for r in rows if r[1] in ids}
            if len(tool) != 3:
                return None
            by_tool = {ids[m]: {int(p) for p in a.partition(":")[2].split(",") if p} for m, a in tool.items()}
            everything = sorted(p for ps in by_tool.values() for p in ps) == list(range(GROUP_PARTITIONS))
            return by_tool if everything and all(by_tool[i] == held(i) for i in alive) else None
        # (once the killed member's session ended: its partitions moved to the living)
        _wait(agree, 60, "kafka-consumer-groups --members never showed the living members holding every "
                         "partition as their callbacks say")
    finally:
        for m in members:
            if m.poll() is None:
                m.send_signal(signal.SIGTERM)
        for m in members:
            try:
                m.wait(30)
            except subprocess.TimeoutExpired:
                m.kill()
    for i, m in enumerate(members):
        if i != victim:
            assert m.returncode == 0, (i, m.stderr.read().decode()[-2000:])
    delivered = _delivered(outs)
    assert set(delivered) == readable, "every readable record delivered, nothing unreadable"
    # each damaged range reported by one member, once; any other member that met it again skipped it quietly
    skips = [(tuple(line["skip"]), line["reported"]) for out in outs for line in _lines(out) if "skip" in line]
    reported = [s for s, again in skips if not again]
    assert sorted(reported) == sorted(set(reported)), skips
    covered = {(p, o) for (p, first, last, _) in reported for o in range(first, last + 1)}
    assert covered == {(p, o) for p, offsets in unreadable.items() for o in offsets}, skips
    # what the killed member was reading was read again by its successor (at-least-once), nothing else twice
    counts = Counter(delivered)
    victims = {p for line in _lines(outs[victim]) for p, _ in line.get("delivered", ())}
    assert all(p in victims for (p, _), n in counts.items() if n > 1), sorted(x for x, n in counts.items() if n > 1)


def _props(bootstrap: str, group: str, **extra) -> dict:
    return {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "max.partition.fetch.bytes": "2048", **extra}


def test_a_range_a_member_reported_is_skipped_quietly_by_the_member_that_takes_over(live_damaged, tmp_path):
    """Member A meets partition 1's damaged batch, reports it (a dead letter) and dies before
    committing past it; member B takes the partition over from A's last commit, skips the range
    without reporting it again, and its commit past it names it (rule, range) for operators.
    Callbacks: A assigned everything; B's assignment is what A lost."""
    from pykbatch.live import JsonLinesDeadLetters, Reader
    from pykbatch.live.cluster import Cluster, TopicPartition
    from pykbatch.live.commit_notes import SkipNotes
    from pykbatch.policy import ErrorPolicy
    bootstrap = live_damaged.broker.bootstrap
    group = f"pykbatch-takeover-{time.monotonic_ns()}"
    (first, last) = min((min(o), max(o)) for p, o in live_damaged.group_unreadable().items() if p == 1)
    tp = TopicPartition(GROUP_TOPIC, 1)
    events = []
    dead_a, dead_b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a = Reader(_props(bootstrap, group, **{"enable.auto.commit": "false"}), subscribe=GROUP_TOPIC,
               policy=ErrorPolicy(tolerance="all"), dead_letters=JsonLinesDeadLetters(dead_a),
               on_assigned=lambda tps: events.append(("a assigned", sorted(tps))))
    try:
        before = None
        deadline = time.monotonic() + 60
        while not any(s.partition == 1 for s in a.skips) and time.monotonic() < deadline:
            positions = a.positions()
            a.poll()
            if before is None and positions.get(tp, 0) > 0:
                a.commit()  # a commit before the damage: where B starts
                before = positions[tp]
        (skip,) = [s for s in a.skips if s.partition == 1]
        assert (skip.first_offset, skip.last_offset, skip.reported) == (first, last, False)
        committed, note = Cluster({"bootstrap.servers": bootstrap}).committed_with_metadata(group, [tp])[tp]
        assert committed is not None and committed <= first, "A did not commit past the damage"
        assert SkipNotes.parse(note).ranges == [(first, last, skip.rule)], note
    finally:
        a.member.close(leave=False)  # A dies: no last commit, no leave (its session ends at the coordinator)
        a.cluster.close()
    assert events == [("a assigned", [TopicPartition(GROUP_TOPIC, p) for p in range(GROUP_PARTITIONS)])]
    with Reader(_props(bootstrap, group), subscribe=GROUP_TOPIC, policy=ErrorPolicy(tolerance="all"),
                dead_letters=JsonLinesDeadLetters(dead_b),
                on_assigned=lambda tps: events.append(("b assigned", sorted(tps)))) as b:
        deadline = time.monotonic() + 60
        while b.positions().get(tp, 0) < END and time.monotonic() < deadline:
            b.poll()
        again = [s for s in b.skips if s.partition == 1]
        assert [(s.first_offset, s.last_offset, s.reported) for s in again] == [(first, last, True)]
        b.commit()
    assert events[-1] == ("b assigned", [TopicPartition(GROUP_TOPIC, p) for p in range(GROUP_PARTITIONS)])
    def dead_letters_of_partition_1(path):
        lines = path.read_text().splitlines() if path.exists() else []
        return [line for line in lines if json.loads(line)["record"]["partition"] == 1]
    assert len(dead_letters_of_partition_1(dead_a)) == 1 and dead_letters_of_partition_1(dead_b) == []
    committed, note = Cluster({"bootstrap.servers": bootstrap}).committed_with_metadata(group, [tp])[tp]
    assert committed == END and SkipNotes.parse(note).ranges == [(first, last, skip.rule)]


def test_librdkafkas_group_consumer_does_not_get_past_the_damaged_batch(live_damaged):
    """The contrast: confluent-kafka's consumer in a KIP-848 group (group.protocol=consumer) on
    the same topic for 15 s: partition 1 stays before its damaged batch."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    (first,) = [min(o) for p, o in live_damaged.group_unreadable().items() if p == 1]
    c = confluent_kafka.Consumer({"bootstrap.servers": live_damaged.broker.bootstrap, "group.protocol": "consumer",
                                  "group.id": f"contrast-{time.monotonic_ns()}", "auto.offset.reset": "earliest",
                                  "check.crcs": True})
    c.subscribe([GROUP_TOPIC])
    seen, errors = [], []
    deadline = time.monotonic() + 15
    try:
        while time.monotonic() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.5):
                if m.error():
                    errors.append(m.error())
                elif m.partition() == 1:
                    seen.append(m.offset())
    finally:
        c.close()
    assert seen and max(seen) < first, "librdkafka's member stays before the damaged batch"
    assert errors, "and reports errors"


def _cli(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pykbatch", *argv], capture_output=True, text=True, timeout=timeout,
                          cwd=Path(__file__).parent.parent)


def test_the_consume_command_in_a_group_goes_on_where_its_last_run_committed(live_damaged):
    """`pykbatch consume --group G --max-messages N` twice: the second run prints from where the
    first stopped -- not from where its last poll ended (a poll past N is not committed) -- so the
    two print every readable record once; each run names the damage it met (exit 1)."""
    bootstrap = live_damaged.broker.bootstrap
    group = f"pykbatch-consume-{time.monotonic_ns()}"
    unreadable = live_damaged.group_unreadable()
    readable = {(p, o) for p in range(GROUP_PARTITIONS) for o in range(END) if o not in unreadable.get(p, ())}
    first_n = random.Random(time.monotonic_ns()).randrange(50, 1000)
    printed, statuses = [], []
    for n in (first_n, len(readable) - first_n):
        run = _cli("consume", "--bootstrap-server", bootstrap, "--topic", GROUP_TOPIC, "--group", group,
                   "--from", "earliest", "--max-messages", str(n), "--jsonl",
                   "--consumer-property", "max.partition.fetch.bytes=4096")
        lines = run.stdout.splitlines()
        assert len(lines) == n, (first_n, run.stderr[-2000:])
        printed += [(r["partition"], r["offset"]) for r in map(json.loads, lines)]
        statuses.append(run.returncode)
        assert f"records read in group {group}" in run.stderr, run.stderr[-2000:]
    assert sorted(printed) == sorted(readable) and len(printed) == len(set(printed)), first_n
    assert 1 in statuses, "the damage met is never 'nothing wrong'"
    refused = _cli("consume", "--bootstrap-server", bootstrap, "--topic", GROUP_TOPIC, "--group", group, "--to", "9")
    assert refused.returncode == 2 and "--to: a group's member reads on" in refused.stderr


def test_groups_describe_shows_what_kafkas_tool_shows_and_the_ranges_skipped(live_damaged):
    """A member, then a second joining while it reads (partitions move, committed on revocation:
    every readable record exactly once), both caught up and committed (one with commit_async: its
    callback comes in a later poll, with no error): `pykbatch groups describe` has Kafka's
    `kafka-consumer-groups --describe` rows (offsets, log ends, lag, the member of each partition);
    after they leave, no active members, the same offsets, and the ranges skipped in partitions 1
    and 4 named (exit 1)."""
    from pykbatch.live import Reader
    from pykbatch.policy import ErrorPolicy
    bootstrap = live_damaged.broker.bootstrap
    group = f"pykbatch-describe-{time.monotonic_ns()}"
    props = _props(bootstrap, group, **{"auto.commit.interval.ms": "100"})
    readers = [Reader(props, subscribe=GROUP_TOPIC, policy=ErrorPolicy(tolerance="all"))]
    delivered = []
    try:
        def caught_up():
            if len(readers) == 1 and delivered:  # the second joins once the first is reading
                readers.append(Reader(props, subscribe=GROUP_TOPIC, policy=ErrorPolicy(tolerance="all")))
            for r in readers:
                t = r.poll(timeout_ms=50).table
                delivered.extend(zip(t.column("partition").to_pylist(), t.column("offset").to_pylist()))
            held = [tp for r in readers for tp in r.assignment]
            return len(held) == GROUP_PARTITIONS and all(r.positions()[tp] == END for r in readers for tp in r.assignment)
        _wait(caught_up, 90, "the two members never read to the end")
        # partitions moved from the first to the second (committed as they were revoked), nobody died:
        # every readable record once
        unreadable = live_damaged.group_unreadable()
        assert sorted(delivered) == sorted((p, o) for p in range(GROUP_PARTITIONS) for o in range(END)
                                           if o not in unreadable.get(p, ()))
        answered = []
        readers[0].commit_async(lambda offsets, error: answered.append((dict(offsets), error)))
        readers[1].commit()
        _wait(lambda: (readers[0].poll(timeout_ms=50), answered)[1], 30, "commit_async's callback never came")
        assert answered == [(readers[0].positions(), None)]

        def ours():
            run = _cli("groups", "describe", "--bootstrap-server", bootstrap, "--group", group)
            return run, sorted(line.split()[:7] for line in run.stdout.splitlines() if line.split()[:1] == [group])
        run, rows = ours()
        tool = sorted(r[:7] for r in _describe(bootstrap, group))
        assert rows == tool and len(rows) == GROUP_PARTITIONS, (rows, tool)
        assert {r[6] for r in rows} == {r.member.member_id for r in readers}
    finally:
        for r in readers:
            r.close()
    run, rows = ours()
    assert run.returncode == 1, run.stderr
    assert f"Consumer group '{group}' has no active members." in run.stdout
    assert rows == sorted([group, GROUP_TOPIC, str(p), str(END), str(END), "0", "-"] for p in range(GROUP_PARTITIONS))
    named = {tuple(line.split()[:4]) for line in run.stdout.splitlines() if line.startswith("  ")}
    for p, offsets in live_damaged.group_unreadable().items():
        assert (f"{GROUP_TOPIC}-{p}", "offsets", f"[{min(offsets)},", f"{max(offsets)}]") in named or p == 4, named
    assert sum(1 for n in named if n[0] == f"{GROUP_TOPIC}-4") == 2 and sum(1 for n in named if n[0] == f"{GROUP_TOPIC}-1") == 1
    missing = _cli("groups", "describe", "--bootstrap-server", bootstrap, "--group", "no-such-group-here")
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    # the classic protocol's settings, refused under KIP-848's (its coordinator sets them), by name
    from pykbatch.live import SettingsError
    for key, says in (("session.timeout.ms", "group.consumer.session.timeout.ms"),
                      ("partition.assignment.strategy", "group.remote.assignor"),
                      ("group.protocol", "consumer .KIP-848, Kafka 4.0.. or classic")):
        with pytest.raises(SettingsError, match=says):
            Reader(_props(bootstrap, group, **{key: "6000" if key == "session.timeout.ms" else "other"}),
                   subscribe=GROUP_TOPIC)


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "range"])
def test_classic_members_share_a_topic_with_librdkafkas_and_kafkas_tool_agrees(kafka_broker, strategy):
    """The classic protocol (group.protocol=classic): two pykbatch members and a librdkafka member
    (confluent-kafka, the same assignor) in one group over six partitions -- whoever the
    coordinator makes leader assigns -- deliver every record; what each holds is what Kafka's
    kafka-consumer-groups --describe --members shows, and `pykbatch groups describe` names the
    same member for each partition; one pykbatch member leaves and the others
    take its partitions, every record still delivered, each at least once."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from pykbatch.live import Reader
    from pykbatch.live.cluster import Cluster
    bootstrap = kafka_broker.bootstrap
    topic = f"classic-{strategy}-{time.monotonic_ns()}"
    group = f"g-{topic}"
    with Cluster({"bootstrap.servers": bootstrap}) as cluster:
        cluster.create_topic(topic, GROUP_PARTITIONS)
        cluster.wait_for_topic(topic)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    n = 3000
    for i in range(n):
        producer.produce(topic, value=b"v%d" % i, partition=i % GROUP_PARTITIONS)
    producer.flush(30)
    everything = {(p, o) for p in range(GROUP_PARTITIONS) for o in range(n // GROUP_PARTITIONS)}
    props = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "classic",
             "partition.assignment.strategy": strategy, "auto.offset.reset": "earliest",
             "session.timeout.ms": "6000", "heartbeat.interval.ms": "500", "auto.commit.interval.ms": "200",
             "max.partition.fetch.bytes": "1024"}
    got: list[tuple[int, int]] = []
    readers = [Reader(props, subscribe=topic) for _ in range(2)]
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                                  "partition.assignment.strategy": strategy, "session.timeout.ms": 6000,
                                  "heartbeat.interval.ms": 500, "max.partition.fetch.bytes": 1024})
    c.subscribe([topic])

    def step():
        for r in readers:
            t = r.poll(timeout_ms=20).table
            got.extend(zip(t.column("partition").to_pylist(), t.column("offset").to_pylist()))
        for m in c.consume(num_messages=50, timeout=0.02):
            if not m.error():
                got.append((m.partition(), m.offset()))
    try:
        def split_as_the_tool_shows():
            step()
            ours = {r.member.member_id: {tp.partition for tp in r.assignment} for r in readers}
            rows = _describe(bootstrap, group, "--members", "--verbose")
            # (Kafka 4.3's tool prints a classic group's members as a KIP-848 group's, epochs "-")
            # GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS CURRENT-EPOCH CURRENT-ASSIGNMENT (topic:0,1) ...
            tool = {r[1]: {int(p) for p in r[6].partition(":")[2].split(",") if p} for r in rows}
            return len(tool) == 3 and all(tool.get(m) == ps for m, ps in ours.items()) and \
                sorted(p for ps in tool.values() for p in ps) == list(range(GROUP_PARTITIONS))
        _wait(split_as_the_tool_shows, 90, "three members never held the partitions as Kafka's tool shows")
        # pykbatch groups describe names each partition's member as Kafka's tool does (a classic group)
        ours = sorted((r.split()[2], r.split()[6]) for r in _cli("groups", "describe", "--bootstrap-server", bootstrap,
                                                                  "--group", group).stdout.splitlines()
                      if r.split()[:1] == [group])
        assert ours == sorted((r[2], r[6]) for r in _describe(bootstrap, group)) and len(ours) == GROUP_PARTITIONS
        readers.pop().close()  # leaves: its partitions move to the others
        _wait(lambda: (step(), set(got) >= everything)[1], 90, "the group never delivered every record")
    finally:
        for r in readers:
            r.close()
        c.close()
    assert set(got) == everything


@pytest.mark.parametrize("group_protocol", ["consumer", "classic"])
def test_a_static_member_that_comes_back_gets_its_partitions_back_and_nobody_else_moves(kafka_broker, group_protocol):
    """group.instance.id: a static member closes (its place kept: KIP-848's epoch -2, or no
    LeaveGroup under the classic protocol) and comes back within the session timeout under the
    same id: it holds what it held, and the dynamic member beside it never held more meanwhile."""
    from pykbatch.live import Reader
    from pykbatch.live.cluster import Cluster
    bootstrap = kafka_broker.bootstrap
    topic = f"static-{group_protocol}-{time.monotonic_ns()}"
    with Cluster({"bootstrap.servers": bootstrap}) as cluster:
        cluster.create_topic(topic, GROUP_PARTITIONS)
        cluster.wait_for_topic(topic)
    props = {"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"}
    if group_protocol == "classic":
        props.update({"group.protocol": "classic", "session.timeout.ms": "8000", "heartbeat.interval.ms": "500",
                      "partition.assignment.strategy": "cooperative-sticky"})
    dynamic = Reader(props, subscribe=topic)
    static = Reader({**props, "group.instance.id": "billing-1"}, subscribe=topic)
    most = []
    try:
        def split():
            for r in (dynamic, static):
                r.poll(timeout_ms=20)
            return len(static.assignment) == len(dynamic.assignment) == GROUP_PARTITIONS // 2
        _wait(split, 60, "the two members never split the partitions")
        held = sorted(static.assignment)
        static.close()
        static = Reader({**props, "group.instance.id": "billing-1"}, subscribe=topic)

        def back():
            for r in (dynamic, static):
                r.poll(timeout_ms=20)
            most.append(len(dynamic.assignment))
            return sorted(static.assignment) == held
        _wait(back, 30, "the static member never got its partitions back")
    finally:
        dynamic.close()
        static.close()
    assert max(most) == GROUP_PARTITIONS // 2, most
