"""An earlier revision of pykbatch, built beside the working tree, to measure against in the same
run: ``checkout(rev)`` makes a worktree of the revision under ~/.cache/pykbatch-bench/<rev> and
builds its native modules in place (once; later runs reuse it); ``run(rev, code)`` runs Python in
it (its pykbatch first on the path) and returns what the code prints last, parsed as JSON."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("PYKBATCH_BENCH_CACHE", Path.home() / ".cache" / "pykbatch-bench"))


def checkout(rev: str) -> Path:
    full = subprocess.run(["git", "-C", str(ROOT), "rev-parse", rev], check=True, capture_output=True,
                          text=True).stdout.strip()
    where = CACHE / full[:12]
    if (where / ".built").exists():
        return where
    if not where.exists():
        where.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), full], check=True,
                       capture_output=True)
    print(f"building pykbatch at {rev} in {where} (once) ...", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "-q"], cwd=where, check=True,
                   capture_output=True)
    (where / ".built").touch()
    return where


def run(rev: str, code: str, timeout: float = 600):
    """``code`` run by this interpreter inside the revision's tree; the JSON of its last line."""
    where = checkout(rev)
    env = dict(os.environ, PYTHONPATH=str(where))
    out = subprocess.run([sys.executable, "-c", code], cwd=where, env=env, check=True, capture_output=True,
                         text=True, timeout=timeout).stdout
    return json.loads(out.strip().splitlines()[-1])
