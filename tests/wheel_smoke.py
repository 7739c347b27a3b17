"""Run by an installed wheel's interpreter, outside the checkout (tests/test_wheels.py): the
compiled core loads and answers as it should on this machine; prints one SMOKE line."""
import contextlib
import io
import json
import os
import platform
import tempfile

import pykbatch as kb
from pykbatch.commands import main

LOG = kb.ValidationConfig(origin="log")

good = kb.build_batch([{"key": b"k%d" % i, "value": b"v" * i, "timestamp": 1000 + i, "headers": [("h", b"x")]}
                       for i in range(5)], base_offset=40, compression="zstd")
bad = bytearray(kb.build_batch([(b"k", b"v")] * 3, base_offset=45))
bad[-2] ^= 1
result = kb.validate(good + bytes(bad), LOG)
assert [(c.rule, c.entry) for c in result.culprits] == [("batch.crc_mismatch", 1)], result.culprits
assert [r.offset for b in kb.iter_batches(good) for r in b] == [40, 41, 42, 43, 44]
assert kb.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value, whichever kernel runs here
table = kb.to_arrow(good)
assert table.num_rows == 5 and table.column("value").to_pylist()[4] == b"vvvv"
repaired = kb.drop_culprits(good + bytes(bad), config=LOG, unrepairable="drop")
assert kb.validate(repaired.data, LOG).ok
with tempfile.TemporaryDirectory() as tmp:
    partition = os.path.join(tmp, "orders-0")
    os.mkdir(partition)
    with open(os.path.join(partition, "00000000000000000040.log"), "wb") as f:
        f.write(good)
    version, audit = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(version), contextlib.suppress(SystemExit):
        main(["--version"])
    with contextlib.redirect_stdout(audit):  # the CLI in process: under qemu-user a child cannot exec
        assert main(["validate", "--segment", partition, "--json"]) == 0
version, audit = version.getvalue(), audit.getvalue()
assert version.startswith(f"pykbatch {kb.__version__} ("), version
assert json.loads(audit.splitlines()[0])["ok"] is True, audit
print("SMOKE", json.dumps({"machine": platform.machine(), "python": platform.python_version(),
                           "version": kb.__version__, "crc32c": kb.native_info()["crc32c"], "file": kb.__file__}))
