"""``pykbatch sample``: sample batches, some damaged on purpose, to try the other commands on."""
from __future__ import annotations


from pykbatch.progress import Progress

from pykbatch.commands.common import (
    at_least_one, output_path, progress_enabled,
)


def add_parser(sub) -> None:
    s = sub.add_parser("sample", help="write sample batches (some damaged on purpose) to a file")
    s.add_argument("--out", required=True, metavar="FILE", help="where to write the sample")
    s.add_argument("--batches", type=at_least_one, default=20, metavar="N",
                   help="how many batches (default 20; four are damaged: see the printed list)")
    s.add_argument("--no-progress", action="store_true", help="no progress line on a terminal")
    s.set_defaults(run=_sample)


def _sample(args) -> int:
    from pykbatch.samples import FAULTS, iter_sample_batches
    output_path(args.out, "--out")
    with open(args.out, "wb") as f, Progress(args.batches, args.out, unit="batches",
                                             enabled=progress_enabled(args) and args.batches >= 10_000) as meter:
        for n, batch in enumerate(iter_sample_batches(args.batches), 1):
            f.write(batch)
            if n % 1000 == 0:
                meter.update(n)
    print(f"wrote {args.batches} batches to {args.out}; damaged on purpose:")
    for i, what in FAULTS.items():
        if i < args.batches:
            print(f"  batch {i}: {what}")
    return 0
