"""The C core on its own, under AddressSanitizer + UndefinedBehaviorSanitizer: every vector and
mutations of it through the fuzz target's driver, then a libFuzzer run (clang).

PYKBATCH_FUZZ_SECONDS sets the libFuzzer run (default 20 on CI, 10 elsewhere; 0 skips it)."""
import os
import shutil
import subprocess

import pytest

from tests.conftest import CONFORMANCE, ROOT, load_json, KAFKA_VECTORS
from tests.samples import batch

CSRC = ROOT / "csrc"
pytestmark = pytest.mark.skipif(shutil.which("make") is None or shutil.which("cc") is None,
                                reason="needs make and a C compiler")


def seeds(directory):
    directory.mkdir()
    blobs = [batch(3) + batch(2, base_offset=3), batch(1, headers=[(b"h", b"v"), (b"n", None)])]
    blobs += [p.read_bytes() for p in (ROOT / "tests" / "fuzz_regressions").iterdir()]
    for v in load_json(KAFKA_VECTORS):
        if v["hex"]:
            blobs.append(bytes.fromhex(v["hex"]))
    for v in (load_json(CONFORMANCE / "vectors.json") or {"vectors": []})["vectors"]:  # where present
        if "hex" in v:
            blobs.append(bytes.fromhex(v["hex"]))
    for i, blob in enumerate(blobs):
        (directory / f"seed{i}").write_bytes(blob)
    return sorted(directory.iterdir())


def make(target):
    out = subprocess.run(["make", "-C", str(CSRC), f"build/{target}"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return CSRC / "build" / target


def test_vectors_and_mutations_under_sanitizers(tmp_path):
    driver = make("run_inputs")
    files = seeds(tmp_path / "seeds")
    out = subprocess.run([str(driver), "300", *map(str, files)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and "runtime error" not in out.stderr, out.stderr[-3000:]
    assert "run_inputs: done" in out.stdout


@pytest.mark.skipif(shutil.which("clang") is None, reason="libFuzzer needs clang (apt-get install clang)")
def test_libfuzzer_smoke(tmp_path):
    seconds = int(os.environ.get("PYKBATCH_FUZZ_SECONDS", "20" if os.environ.get("CI") else "10"))
    if seconds <= 0:
        pytest.skip("PYKBATCH_FUZZ_SECONDS=0")
    fuzzer = make("fuzz_validate")
    seeds(tmp_path / "seeds")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    out = subprocess.run([str(fuzzer), f"-max_total_time={seconds}", "-max_len=8192", "-timeout=10",
                          f"-artifact_prefix={tmp_path}/", str(corpus), str(tmp_path / "seeds")],
                         capture_output=True, text=True, timeout=seconds + 300)
    crashes = list(tmp_path.glob("crash-*")) + list(tmp_path.glob("timeout-*")) + list(tmp_path.glob("leak-*"))
    assert out.returncode == 0 and not crashes, out.stderr[-4000:]
    assert "Done" in out.stderr
