"""Full validation with a compacted, timestamp-checked topic config beside plain CRC + structural
validation, on workloads A/B/C (issue target: within 1.2x).

    OPENBLAS_NUM_THREADS=1 python benchmarks/validator_config.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pykbatch as kb  # noqa: E402
from compare import measure  # noqa: E402
from workloads import WORKLOADS, build  # noqa: E402

PLAIN = kb.ValidationConfig(strict=False)
FULL = kb.ValidationConfig(strict=False, compacted=True, timestamp_before_max_ms=10**12,
                           timestamp_after_max_ms=10**12, now_ms=1_700_000_000_000)

if __name__ == "__main__":
    for name in WORKLOADS:
        data = build(name, as_produced=True)  # the leader's view: producer batches
        assert kb.validate(data, PLAIN).ok and kb.validate(data, FULL).ok
        plain = measure(lambda d: kb.validate(d, PLAIN), data, 15)
        full = measure(lambda d: kb.validate(d, FULL), data, 15)
        print(f"{name}: plain {plain * 1e3:.2f} ms, compacted + timestamps {full * 1e3:.2f} ms, "
              f"ratio {full / plain:.3f} (target <= 1.2)")
