"""A hanging transaction on the real broker: a transactional producer killed mid-transaction
leaves its records without a marker; ``pykbatch validate --segment`` names it with the
kafka-transactions.sh command that aborts it; that command, run with Kafka's own tool against the
broker, closes it (the broker writes the ABORT marker)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from pykbatch.log.audit import audit_partition
from pykbatch.commands import main
from tests import kafka_tools

pytestmark = pytest.mark.skipif(kafka_tools.unavailable() is not None, reason=str(kafka_tools.unavailable()))

TOPIC = "hanging"

HANGING_PRODUCER = textwrap.dedent("""
    import os, sys
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "hangs", "transaction.timeout.ms": 900000})
    p.init_transactions(30)
    for committed in (True, False):
        p.begin_transaction()
        for i in range(3):
            p.produce(sys.argv[2], key=b"k%d" % i, value=b"v")
        p.flush(30)
        if committed:
            p.commit_transaction(30)
    os._exit(0)   # killed mid-transaction: no abort, no marker
""")


def test_a_hanging_transaction_is_reported_and_kafkas_tool_closes_it(kafka_broker, tmp_path, capsys):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
        f.result(60)
    subprocess.run([sys.executable, "-c", HANGING_PRODUCER, kafka_broker.bootstrap, TOPIC], check=True, timeout=120)

    (tmp_path / "before").mkdir()
    before = kafka_broker.snapshot(tmp_path / "before", [TOPIC]) / f"{TOPIC}-0"
    (open_txn,) = audit_partition(str(before)).open_transactions
    assert (open_txn.topic, open_txn.partition, open_txn.first_offset) == (TOPIC, 0, 4)  # after 3 records + a marker
    assert open_txn.producer_epoch >= 0 and open_txn.age_ms is not None and open_txn.age_ms >= 0

    assert main(["validate", "--segment", str(before), "--json", "--bootstrap-server", kafka_broker.bootstrap]) in (0, 1)
    reported = json.loads(capsys.readouterr().out)["open_transactions"]
    command = reported[0]["abort_command"]
    assert command == (f"kafka-transactions.sh --bootstrap-server {kafka_broker.bootstrap} abort --topic {TOPIC} "
                       f"--partition 0 --start-offset 4")

    args = command.split()[1:]  # Kafka's own tool, as kafka-transactions.sh runs it
    done = kafka_tools.java("org.apache.kafka.tools.TransactionsCommand", *args, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]

    (tmp_path / "after").mkdir()
    after = kafka_broker.snapshot(tmp_path / "after", [TOPIC]) / f"{TOPIC}-0"
    audit = audit_partition(str(after))
    assert audit.open_transactions == []
    aborted = [t for t in audit.producers.completed_transactions if t.first_offset == 4]
    assert aborted and aborted[0].is_aborted  # the broker wrote the ABORT marker
