"""Windows of a segment: runs of whole, contiguous entries about ``window_bytes`` long, decoded
one at a time so that memory stays bounded whatever the segment's size (the Parquet / Arrow
export and the Spark ``kafka-segment`` source)."""
from __future__ import annotations

from typing import Callable, Iterable, Iterator


def entry_windows(batches: Iterable, window_bytes: int,
                  keep: Callable | None = None) -> Iterator[list[tuple[int, int]]]:
    """Lists of (position, size) of consecutive entries from ``batches``, each closed once it
    spans ``window_bytes``.  An entry ``keep`` refuses is left out and closes the run before it,
    and so do bytes the walk skipped (a span whose framing was lost): a window's entries are
    always contiguous.  No batch object is held across a yield."""
    run: list[tuple[int, int]] = []
    for b in batches:
        if keep is not None and not keep(b):
            del b
            if run:
                yield run
                run = []
            continue
        if run and b.position != run[-1][0] + run[-1][1]:
            yield run
            run = []
        run.append((b.position, b.size))
        del b
        if run[-1][0] + run[-1][1] - run[0][0] >= window_bytes:
            yield run
            run = []
    if run:
        yield run
