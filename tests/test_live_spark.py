"""kafka-kbatch, Spark's Kafka source read by pykbatch's live reader, on the session broker and
Spark: the damaged topic (tests/live_damage.py) read in a batch query gives every readable record
and no failed task; a streaming query killed (SIGKILL) mid-batch and restarted on its checkpoint
writes every offset exactly once to Parquet; a read-process-write query into kafka-kbatch's
exactly-once sink on local-cluster, its executors and driver killed at drawn points and its
checkpoint once lost, writes every row once and leaves its group at the input's end."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import kafka_tools
from tests.live_damage import BATCH, BATCHES, TOPIC, create_topic, produce_batches, unreadable, value_of

pytest.importorskip("pyspark", reason="pyspark is the [spark] extra")
pytestmark = [pytest.mark.spark, pytest.mark.skipif(kafka_tools.unavailable() is not None,
                                                    reason=str(kafka_tools.unavailable()))]
ROOT = Path(__file__).resolve().parents[1]
# runs of the killed read-process-write job (PYKBATCH_EOS_RUNS): locally three (two killed), under CI
# two (one killed, then one without its checkpoint killed too and going on to the end)
EOS_RUNS = int(os.environ.get("PYKBATCH_EOS_RUNS") or (2 if os.environ.get("CI") else 3))


@pytest.fixture(scope="module")
def registered(spark):
    import spark_udfs
    spark_udfs.register(spark)
    return spark


def kbatch(spark, bootstrap, stream=False, **options):
    reader = (spark.readStream if stream else spark.read).format("kafka-kbatch") \
        .option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader


def test_a_batch_query_reads_every_readable_record_of_a_damaged_topic(registered, live_damaged):
    df = kbatch(registered, live_damaged.broker.bootstrap, subscribe=TOPIC, **{"errors.tolerance": "all",
                                                                               "includeHeaders": "true"}).load()
    assert [f.name for f in df.schema.fields] == ["key", "value", "topic", "partition", "offset", "timestamp",
                                                  "timestampType", "headers"]
    assert df.schema["timestamp"].dataType.typeName() == "timestamp"
    offsets = [r.offset for r in df.select("offset").orderBy("offset").collect()]
    bad = unreadable(live_damaged.on_disk, live_damaged.done)
    assert offsets == [o for o in range(BATCHES * BATCH) if o not in bad]


SPARK_KAFKA = """
import sys
from spark_udfs.session import quiet_session
spark = quiet_session("local[2]", "spark-kafka-contrast", **{"spark.jars": sys.argv[3]})
df = (spark.read.format("kafka").option("kafka.bootstrap.servers", sys.argv[1]).option("subscribe", sys.argv[2])
      .option("startingOffsets", "earliest").option("endingOffsets", "latest").option("failOnDataLoss", "false").load())
print("COUNT", df.count(), flush=True)
"""


def test_sparks_own_kafka_source_fails_on_the_damaged_topic(live_damaged, tmp_path):
    """The contrast: Spark's Kafka source (the Java consumer on the executors) fails the query on
    the first damaged batch, failOnDataLoss=false or not: the data is there, only unreadable."""
    try:
        jars = kafka_tools.spark_kafka_jars()
    except RuntimeError as exc:
        pytest.skip(f"Spark's Kafka source could not be fetched from Maven Central: {exc}")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    try:
        proc = subprocess.run([sys.executable, "-c", SPARK_KAFKA, live_damaged.broker.bootstrap, TOPIC, jars],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        return  # stuck is the other way it fails
    assert proc.returncode != 0 and "COUNT" not in proc.stdout, proc.stdout[-2000:]
    assert "corrupt" in proc.stderr.lower() or "seek past" in proc.stderr, proc.stderr[-3000:]


def test_tolerance_none_fails_the_query_naming_the_range(registered, live_damaged):
    first = live_damaged.on_disk[15]
    df = kbatch(registered, live_damaged.broker.bootstrap, subscribe=TOPIC).load()
    with pytest.raises(Exception) as err:
        df.count()
    assert f"offsets [{first.base_offset}, {first.last_offset}]" in str(err.value)
    assert "batch.crc_mismatch" in str(err.value)


def test_unknown_options_and_missing_ones_are_named(registered, live_damaged):
    with pytest.raises(Exception, match="subscribePattern is not supported"):
        kbatch(registered, live_damaged.broker.bootstrap, subscribePattern="t.*").load().count()
    with pytest.raises(Exception, match="unknown option"):
        kbatch(registered, live_damaged.broker.bootstrap, subscribe=TOPIC, startingOfsets="earliest").load().count()


def executors_of(session: int) -> list[int]:
    """The executor JVMs a job started in its own session runs (local-cluster)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == session and \
                        b"CoarseGrainedExecutorBackend" in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:  # gone meanwhile
                pass
    return sorted(pids)


def run_job(bootstrap, topic, out, checkpoint, mode, *, kill_after_commits=None, kill_delay=0.0, timeout=240,
            master="local[2]", executor_kill=None, relative=False):
    """The job of tests/live_stream_job.py, to its end (``kill_after_commits`` None) or SIGKILLed
    with its Python workers ``kill_delay`` seconds after its checkpoint holds that many
    commits; ``executor_kill`` (commits, delay): before either, one of its executor JVMs is
    SIGKILLed the same way (local-cluster).  Commits counted from the run's start when
    ``relative``.  Returns the executors killed."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "live_stream_job.py"), bootstrap, topic, str(out),
                             str(checkpoint), mode, master], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + timeout

    def to_its_end():
        output, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        assert proc.returncode == 0, output[-3000:]

    if kill_after_commits is None and executor_kill is None:
        to_its_end()
        return []
    commits = checkpoint / "commits"

    def done():
        return len([p for p in commits.glob("*") if p.name.isdigit()]) if commits.exists() else 0

    before = done() if relative else 0

    def wait_for(count):
        while time.monotonic() < deadline:
            if done() - before >= count:
                return
            assert proc.poll() is None, proc.stdout.read()[-30000:]
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"the job did not reach {count} commits in {timeout} s: {proc.stdout.read()[-3000:]}")

    killed = []
    if executor_kill is not None:
        wait_for(executor_kill[0])
        time.sleep(executor_kill[1])  # a drawn point of a micro-batch: its tasks reading, writing, committing
        executors = executors_of(proc.pid)
        if executors:
            killed.append(executors[int(executor_kill[1] * 1000) % len(executors)])
            os.kill(killed[-1], signal.SIGKILL)  # Spark runs the task again elsewhere
    if kill_after_commits is None:
        to_its_end()
        return killed
    wait_for(kill_after_commits)
    time.sleep(kill_delay)  # a drawn point of the next micro-batch: its tasks writing, committing, or after
    os.killpg(proc.pid, signal.SIGKILL)  # the driver JVM, its executors and Python workers, no clean stop
    proc.wait()
    return killed


@pytest.mark.slow
def test_a_streaming_query_killed_and_restarted_writes_every_offset_once(registered, kafka_broker, tmp_path):
    topic = "live-stream"
    create_topic(kafka_broker.bootstrap, topic, partitions=2)
    for p in (0, 1):
        produce_batches(kafka_broker.bootstrap, topic, 30, partition=p)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    # one kill here (the read-process-write test below kills its queries more, at drawn points)
    run_job(kafka_broker.bootstrap, topic, out, checkpoint, "run", kill_after_commits=3, kill_delay=0.3)
    run_job(kafka_broker.bootstrap, topic, out, checkpoint, "finish")
    rows = registered.read.parquet(str(out)).select("partition", "offset").collect()
    got = sorted((r.partition, r.offset) for r in rows)
    assert got == [(p, o) for p in (0, 1) for o in range(30 * BATCH)]  # each once: none lost, none twice
    batches = sorted(int(p.name) for p in (checkpoint / "commits").glob("*") if p.name.isdigit())
    assert len(batches) >= 30 * BATCH * 2 // 150  # maxOffsetsPerTrigger=150 admitted it in pieces


@pytest.mark.slow
def test_read_process_write_killed_at_drawn_points_holds_each_row_once_and_the_group_agrees(registered, kafka_broker,
                                                                                           tmp_path):
    """kafka-kbatch to kafka-kbatch, deliveryGuarantee=exactly_once with the source's offsets
    committed to a group in the sink's transactions, on local-cluster (executors in JVMs of their
    own): EOS_RUNS runs, each with one executor JVM SIGKILLed at a drawn point (Spark runs its task
    again elsewhere: the attempt killed mid-transaction is fenced or aborted by the next one's
    InitProducerId), all but the last then with the driver and everything under it at a later
    drawn point (before a task's commit, between the tasks' commits and the checkpoint's, during
    EndTxn), the last to the input's end; one drawn restart without its checkpoint (lost: the
    new query starts where the group's committed offsets say the output ends).  The output read
    with read_committed holds every input row exactly once, the group's offsets are the input's
    end, and no transaction of the job is left open (ListTransactions).  Seed printed;
    PYKBATCH_EOS_SEED repeats a run.  (An off-by-one in the committed offsets fails it with
    duplicates at the lost checkpoint: tried.)"""
    import random
    import shutil

    from pykbatch.live import Cluster, TopicPartition
    from tests.test_live_produce import consume_all
    seed = int(os.environ.get("PYKBATCH_EOS_SEED", random.randrange(2**32)))
    print(f"PYKBATCH_EOS_SEED={seed}")
    rng = random.Random(seed)
    bootstrap = kafka_broker.bootstrap
    source, output, group = f"eos-in-{seed}", f"eos-out-{seed}", f"eos-rpw-{seed}"
    create_topic(bootstrap, source, partitions=2)
    create_topic(bootstrap, output, partitions=2)
    produce_batches(bootstrap, source, 30, partition=0)
    produce_batches(bootstrap, source, 30, partition=1, first_offset=1_000_000)
    checkpoint = tmp_path / "checkpoint"
    sink, master = f"kafka-kbatch:exactly_once:{output}:{group}", "local-cluster[2,1,1024]"
    import pyspark
    work = Path(os.environ.get("SPARK_HOME", os.path.dirname(pyspark.__file__))) / "work"
    apps_before = set(work.glob("app-*"))
    runs = EOS_RUNS
    lost = rng.randrange(1, runs)  # the run that starts without the checkpoint
    killed = []
    try:
        for run in range(runs):  # micro-batches of 60 offsets: the killed runs commit 2-5 each (of 20), the last the rest
            if run == lost:
                shutil.rmtree(checkpoint)
            at = rng.randrange(1, 3)
            last = run == runs - 1  # the last run goes on to the input's end after its executor is killed
            killed += run_job(bootstrap, source, sink, checkpoint, "finish" if last else "run", master=master,
                              timeout=300, relative=True, executor_kill=(at, rng.uniform(0, 0.8)),
                              kill_after_commits=None if last else at + rng.randrange(1, 3),
                              kill_delay=rng.uniform(0, 0.8))
    finally:
        for app in set(work.glob("app-*")) - apps_before:  # a killed driver leaves its executors' folders
            shutil.rmtree(app, ignore_errors=True)
    assert len(killed) == runs, killed  # an executor JVM was found and killed in each run
    want = sorted(value_of(o) for o in range(30 * BATCH)) + sorted(value_of(1_000_000 + o) for o in range(30 * BATCH))
    got = consume_all(bootstrap, output, len(want), read_committed=True)
    values = sorted(v for _, _, _, v, _, _ in got)
    assert values == sorted(want), (seed, len(values), len(want), len(values) - len(set(values)))
    with Cluster({"bootstrap.servers": bootstrap}) as cluster:
        committed = cluster.committed(group, [TopicPartition(source, 0), TopicPartition(source, 1)])
    assert committed == {TopicPartition(source, 0): 30 * BATCH, TopicPartition(source, 1): 30 * BATCH}
    deadline = time.monotonic() + 30
    while kafka_tools.open_transactions(bootstrap, f"{group}-") and time.monotonic() < deadline:
        time.sleep(0.5)  # a marker still being written
    assert kafka_tools.open_transactions(bootstrap, f"{group}-") == [], seed


def test_the_live_pages_examples_run(registered, kafka_broker, capsys):
    """docs/live.md's examples, in order, against the session broker (its "localhost:9092")."""
    from tests.test_docs import blocks
    create_topic(kafka_broker.bootstrap, "orders", partitions=2)
    for p in (0, 1):
        produce_batches(kafka_broker.bootstrap, "orders", 2, partition=p)
    namespace = {"__name__": "docs_live", "spark": registered}
    for code in blocks("live.md", "python"):
        exec(compile(code.replace("localhost:9092", kafka_broker.bootstrap), "docs/live.md", "exec"), namespace)
    assert namespace["table"].num_rows == 2 * 2 * BATCH
    assert "|partition|count|" in capsys.readouterr().out
    from tests.test_docs import BLOCK
    (readme,) = [c for lang, c in BLOCK.findall((ROOT / "README.md").read_text())
                 if lang == "python" and "pykbatch.live" in c]
    namespace = {"__name__": "readme_live"}
    exec(compile(readme.replace("broker:9092", kafka_broker.bootstrap), "README.md", "exec"), namespace)
    assert namespace["table"].num_rows == 2 * 2 * BATCH


def test_sql_reads_a_live_topic_through_a_view(registered, live_damaged):
    bootstrap = live_damaged.broker.bootstrap
    registered.sql(f"CREATE OR REPLACE TEMPORARY VIEW damaged USING `kafka-kbatch` OPTIONS "
                   f"(`kafka.bootstrap.servers` '{bootstrap}', subscribe '{TOPIC}', `errors.tolerance` 'all')")
    bad = unreadable(live_damaged.on_disk, live_damaged.done)
    row = registered.sql("SELECT count(*) AS n, max(offset) AS last FROM damaged").first()
    assert (row.n, row.last) == (BATCHES * BATCH - len(bad), BATCHES * BATCH - 1)


def test_the_spark_source_dead_letters_to_a_topic(registered, live_damaged):
    from tests.live_damage import create_topic
    bootstrap = live_damaged.broker.bootstrap
    create_topic(bootstrap, "live-spark-dlq")
    n = kbatch(registered, bootstrap, subscribe=TOPIC, **{"errors.tolerance": "all",
                                                          "errors.deadletterqueue.topic.name": "live-spark-dlq"}).load().count()
    assert n == BATCHES * BATCH - len(unreadable(live_damaged.on_disk, live_damaged.done))
    letters = kbatch(registered, bootstrap, subscribe="live-spark-dlq", includeHeaders="true").load().collect()
    assert len(letters) == len(live_damaged.done)
    assert all(any(h.key == "__connect.errors.topic" and bytes(h.value) == TOPIC.encode() for h in r.headers)
               for r in letters)


def test_a_stream_commits_each_micro_batch_to_its_group_as_kafkas_own_tool_shows(registered, kafka_broker, tmp_path):
    """commitOffsets=true: each micro-batch's end offsets are committed to kafka.group.id once
    Spark commits the batch, so the query's lag reads like any consumer's -- Kafka's own
    kafka-consumer-groups --describe shows CURRENT-OFFSET at the log end and LAG 0 when the query
    is caught up, and follows new records.  The committed offsets only move forward, a micro-batch
    at a time.  Without a group, or in a batch query, the option is refused by name."""
    from pykbatch.live import Cluster, TopicPartition
    bootstrap = kafka_broker.bootstrap
    topic, group = "stream-commits", "stream-commits-lag"
    create_topic(bootstrap, topic, partitions=2)
    for p in (0, 1):
        produce_batches(bootstrap, topic, 3, partition=p)
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    query = (kbatch(registered, bootstrap, stream=True, subscribe=topic, startingOffsets="earliest",
                    maxOffsetsPerTrigger=20, commitOffsets="true", **{"kafka.group.id": group}).load()
             .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="200 milliseconds").start())
    seen = []

    def committed_until(want):
        deadline = time.monotonic() + 90
        with Cluster({"bootstrap.servers": bootstrap}) as cluster:
            while time.monotonic() < deadline:
                now = cluster.committed(group, tps)
                if not seen or seen[-1] != now:
                    seen.append(now)
                if now == want:
                    return
                time.sleep(0.05)
        raise AssertionError(f"the group's offsets are {seen[-1]}, not {want}")
    try:
        committed_until({tps[0]: 3 * BATCH, tps[1]: 3 * BATCH})
        lines = kafka_tools.java("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server",
                                 bootstrap, "--describe", "--group", group, timeout=120).stdout.splitlines()
        rows = [line.split() for line in lines if line.split()[:2] == [group, topic]]
        assert sorted((int(r[2]), int(r[3]), int(r[4]), int(r[5])) for r in rows) == \
            [(0, 3 * BATCH, 3 * BATCH, 0), (1, 3 * BATCH, 3 * BATCH, 0)], lines
        produce_batches(bootstrap, topic, 1, partition=1)
        committed_until({tps[0]: 3 * BATCH, tps[1]: 4 * BATCH})
    finally:
        query.stop()
    for before, after in zip(seen, seen[1:]):
        assert all((before[tp] or 0) <= (after[tp] or 0) for tp in tps), seen
    assert len(seen) >= 4, seen  # 140 offsets by 20 a micro-batch: seen between batches, not only at the end
    with pytest.raises(Exception, match="commitOffsets=true commits to the group named by kafka.group.id"):
        kbatch(registered, bootstrap, stream=True, subscribe=topic, commitOffsets="true").load() \
            .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "refused")).start() \
            .processAllAvailable()
    with pytest.raises(Exception, match="startingOffsets=committed starts from the offsets of the group named by"):
        kbatch(registered, bootstrap, subscribe=topic, startingOffsets="committed").load().count()
    with pytest.raises(Exception, match="commitOffsets is for streaming queries"):
        kbatch(registered, bootstrap, subscribe=topic, commitOffsets="true", **{"kafka.group.id": group}).load().count()

