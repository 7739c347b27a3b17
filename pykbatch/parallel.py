"""Work spread over the cores this process may use, results in input order.

The C core releases the GIL around validation, decoding and decompression, so threads (not
processes: no pickling of results, mmaps shared) run segments and windows side by side; the
output is the same as one core's, only sooner.
"""
from __future__ import annotations

import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, e.g. under ``taskset``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def jobs_or_default(jobs: int | None) -> int:
    if jobs is None:
        return available_cores()
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, not {jobs}")
    return jobs


@contextmanager
def ordered_map(fn: Callable[[T], R], items: Iterable[T], jobs: int | None, ahead: int | None = None) -> Iterator[Iterator[R]]:
    """``map(fn, items)`` run by ``jobs`` threads, at most ``ahead`` items (default 2 x jobs)
    started before their result is taken: bounded memory, results in order.  One job: the plain
    lazy map, no thread."""
    jobs = jobs_or_default(jobs)
    if jobs == 1:
        yield map(fn, items)
        return
    ahead = ahead or 2 * jobs
    with ThreadPoolExecutor(jobs, thread_name_prefix="pykbatch") as pool:
        pending: deque = deque()

        def results():
            source = iter(items)
            for item in source:
                pending.append(pool.submit(fn, item))
                if len(pending) >= ahead:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        try:
            yield results()
        finally:
            for future in pending:
                future.cancel()
