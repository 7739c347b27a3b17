"""``pykbatch rules``: the catalogue of every rule pykbatch reports."""
from __future__ import annotations

import json


from pykbatch.commands.common import (
    UsageError,
)


def add_parser(sub) -> None:
    rl = sub.add_parser("rules", help="list every rule pykbatch checks: id, Kafka's code, stage, message")
    rl.add_argument("prefix", nargs="?", default="", help="only the rules whose id starts so (e.g. record.)")
    rl.add_argument("--json", action="store_true", help="a JSON array")
    rl.set_defaults(run=_rules)


def _rules(args) -> int:
    """The catalogue of rules (csrc/kb_rules.def): every rule pykbatch reports."""
    from pykbatch import errors
    from pykbatch.rules import RULES
    rows = [{"rule": r.id, "code": r.code, "name": errors.error_name(r.code), "stage": r.stage, "kafka": r.kafka,
             "per_record": r.record_error, "message": r.template, "detail": r.detail} for r in RULES[1:]
            if not args.prefix or r.id.startswith(args.prefix)]
    if not rows:
        raise UsageError(f"no rule id starts with {args.prefix!r} (`pykbatch rules` lists them all)")
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        flags = ("" if row["kafka"] else " strict") + (" per-record" if row["per_record"] else "")
        print(f"{row['rule']}  {row['name']}({row['code']}) {row['stage']}{flags}")
        print(f"    {row['message']}" + (f" ({row['detail']})" if row["detail"] else ""))
    return 0
