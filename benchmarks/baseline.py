"""An earlier revision of pykbatch, built beside the working tree, to measure against in the same
run: ``checkout(rev)`` makes a worktree of the revision under ~/.cache/pykbatch-bench/<rev>, builds
its wheel (pip, in an isolated build as a user's install) and unpacks it there (once; later runs
reuse it); ``run(rev, code)`` runs Python with that pykbatch first on the path and returns what the
code prints last, parsed as JSON."""
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
    site = where / "site"
    if (where / ".built").exists():
        return site
    if not (where / "tree").exists():
        where.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where / "tree"), full],
                       check=True, capture_output=True)
    print(f"building pykbatch at {rev} in {where} (once) ...", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(where / "wheel"),
                    str(where / "tree")], check=True, capture_output=True)
    import zipfile
    for wheel in (where / "wheel").glob("pykbatch-*.whl"):
        zipfile.ZipFile(wheel).extractall(site)
    (where / ".built").touch()
    return site


def run(rev: str, code: str, timeout: float = 600):
    """``code`` run by this interpreter inside the revision's tree; the JSON of its last line."""
    site = checkout(rev)
    env = dict(os.environ, PYTHONPATH=str(site))
    out = subprocess.run([sys.executable, "-c", code], cwd=site, env=env, check=True, capture_output=True,
                         text=True, timeout=timeout).stdout
    return json.loads(out.strip().splitlines()[-1])
