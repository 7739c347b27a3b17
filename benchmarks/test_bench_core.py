"""pytest-benchmark suite: every reader on workloads A/B/C, and CRC32C beside the crc32c package.

    pytest benchmarks/ --benchmark-only --benchmark-group-by=param:workload
"""
import os

import crc32c as crc32c_ref
import pytest

import pykbatch as kb
from readers import READERS
from workloads import WORKLOADS, build

DATA = {}


def data(workload):
    if workload not in DATA:
        DATA[workload] = build(workload)
    return DATA[workload]


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_read(benchmark, workload, reader):
    benchmark.group = f"workload {workload}"
    buf = data(workload)
    n = benchmark(READERS[reader], buf)
    assert n == WORKLOADS[workload]["records"] * 64


BLOB = os.urandom(1 << 20)


@pytest.mark.parametrize("impl", ["pykbatch", "crc32c package"])
def test_crc32c_1mib(benchmark, impl):
    benchmark.group = "crc32c 1 MiB"
    fn = kb.crc32c if impl == "pykbatch" else crc32c_ref.crc32c
    assert benchmark(fn, BLOB) == crc32c_ref.crc32c(BLOB)
