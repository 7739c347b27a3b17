"""What the Spark benchmarks share: a local[2] session whose Python workers run this interpreter,
and cases timed interleaved (one warm-up each, then every case once per repeat, so the machine's
noise falls on all of them alike)."""
import time


def local_session(**conf):
    """A quiet local[2] SparkSession with pykbatch's functions registered; ``conf``: further Spark
    settings by their full names."""
    from spark_udfs.session import quiet_session
    return quiet_session("local[2]", "pykbatch-bench", **conf)


def time_cases(cases: dict, repeats: int) -> dict:
    """name -> wall times of ``repeats`` runs of each case, interleaved, after one warm-up run
    (workers start, modules load)."""
    for run in cases.values():
        run()
    times = {name: [] for name in cases}
    for _ in range(repeats):
        for name, run in cases.items():
            t0 = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t0)
    return times
