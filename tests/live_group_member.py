"""One member of a consumer group, as a service runs it, for tests/test_live_group.py:

    python tests/live_group_member.py BOOTSTRAP GROUP TOPIC OUT PACE_S [PROPERTY=VALUE ...]

Polls a pykbatch Reader in GROUP (subscribed to TOPIC) until SIGTERM, then closes it (its last
commit, the group left).  After each poll it appends to OUT, as JSON lines, what that poll
delivered (partition, offsets), each skip (with whether the group reported it before), and each
rebalance callback; the first line names the member.  PACE_S: a pause after each poll, as a
service's processing takes time (so a kill lands mid-stream).  Every write is flushed before the next poll
commits it (enable.auto.commit: at-least-once), so a SIGKILL loses nothing the file does not show.
"""
from __future__ import annotations

import json
import signal
import sys
import time

from pykbatch.live import Reader
from pykbatch.policy import ErrorPolicy


def main(bootstrap: str, group: str, topic: str, out_path: str, pace_s: str, *extra: str) -> int:
    props = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
             "auto.commit.interval.ms": "1000", **dict(e.split("=", 1) for e in extra)}
    out = open(out_path, "a", buffering=1)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))

    def write(**line):
        out.write(json.dumps(line) + "\n")
        out.flush()

    def callback(kind):
        return lambda tps: write(callback=kind, partitions=sorted(tp.partition for tp in tps))
    reader = Reader(props, subscribe=topic, policy=ErrorPolicy(tolerance="all"), on_assigned=callback("assigned"),
                    on_revoked=callback("revoked"), on_lost=callback("lost"))
    write(member=reader.member.member_id)
    try:
        while not stop:
            poll = reader.poll()
            table = poll.table
            if table.num_rows:
                parts, offsets = table.column("partition").to_pylist(), table.column("offset").to_pylist()
                write(delivered=[[p, o] for p, o in zip(parts, offsets)])
            for s in poll.skips:
                write(skip=[s.partition, s.first_offset, s.last_offset, s.rule], reported=s.reported)
            time.sleep(float(pace_s))
    finally:
        reader.close()
        write(closed=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
