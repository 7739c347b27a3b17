"""What the Spark benchmarks share: a local[2] session whose Python workers run this interpreter,
and cases timed interleaved (one warm-up each, then every case once per repeat, so the machine's
noise falls on all of them alike)."""
import time


def local_session(jvm=None, **conf):
    """A quiet local[2] SparkSession with pykbatch's functions registered (``jvm`` as
    ``quiet_session`` takes it: the JVM functions where pykbatch's jar can be had); ``conf``:
    further Spark settings by their full names."""
    from spark_udfs.session import quiet_session
    return quiet_session("local[2]", "pykbatch-bench", jvm=jvm, **conf)


def python_function(name: str):
    """The Python (Arrow UDF) implementation of a kbatch_* function, whichever path the session
    registered: the "today" column of the JVM comparisons."""
    from spark_udfs.functions import _udfs
    return _udfs()[name]


def jvm_function(name: str):
    """A kbatch_* function's JVM implementation (the catalog's), or None without pykbatch's jar."""
    from spark_udfs import jvm
    if jvm.unavailable_reason() is not None:
        return None
    from pyspark.sql.functions import call_function
    return lambda *cols: call_function(f"{jvm.CATALOG}.{name}", *cols)


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
