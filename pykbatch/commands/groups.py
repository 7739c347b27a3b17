"""``pykbatch groups describe``: a consumer group's lag and the ranges it skipped, in the shape of
Kafka's ``kafka-consumer-groups --describe`` (its columns, then SKIPPED: how many ranges the
group's members named in the partition's commit metadata), each skipped range listed after.
Exit status 1 when the group skipped any range: damage the group met is never "nothing wrong"."""
from __future__ import annotations

import json
import sys

from pykbatch.commands.common import CANNOT_RUN, client_properties


def add_parser(sub) -> None:
    g = sub.add_parser("groups", help="consumer groups of a live cluster: lag, members, skipped ranges")
    what = g.add_subparsers(dest="groups_command", required=True, metavar="describe")
    d = what.add_parser("describe", help="a group's committed offsets, lag, members and the ranges it skipped, "
                                         "as kafka-consumer-groups --describe")
    d.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="the cluster")
    d.add_argument("--group", required=True, metavar="GROUP", help="the consumer group")
    d.add_argument("--command-config", dest="config_file", metavar="FILE",
                   help="client properties, one key=value a line (security settings)")
    d.add_argument("--json", action="store_true", help="one JSON document: members, partitions, skipped ranges")
    d.set_defaults(run=_describe)


def _describe(args) -> int:
    from pykbatch.live import Cluster, ClusterError, SettingsError
    from pykbatch.live.groups import describe
    try:
        with Cluster(client_properties(args.config_file, [], args.bootstrap_server, "--command-config")) as cluster:
            group = describe(cluster, args.group)
    except (ClusterError, SettingsError) as exc:
        print(f"pykbatch groups: error: {exc}", file=sys.stderr)
        return CANNOT_RUN
    if not group.rows and not group.members:
        print(f"Error: Consumer group '{args.group}' does not exist.", file=sys.stderr)
        return CANNOT_RUN
    skipped = [(r.tp, rng) for r in group.rows for rng in r.notes.ranges]
    args.verdict.found(any(r.notes.total for r in group.rows))
    if args.json:
        print(json.dumps(group.as_dict()))
        return args.verdict.status
    if not group.members:
        print(f"\nConsumer group '{args.group}' has no active members.")
    rows = [group.HEADER, *group.table()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(group.HEADER))]
    print()
    for r in rows:
        print(" ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    if skipped:
        print("\nRanges the group skipped (named in its commits):")
        for tp, (first, last, rule) in skipped:
            print(f"  {tp} offsets [{first}, {last}] {rule}")
    return args.verdict.status
