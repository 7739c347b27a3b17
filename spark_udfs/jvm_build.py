"""Builds the JVM half of the Spark layer's native path: the JNI shim library (csrc/jni/kb_jni.c
with the C core) at install time, by setup.py, where a JDK's jni.h is found.  No imports of
pykbatch or spark_udfs here: setup.py loads this file by path before either is built.

The library's build id (``VERSION_FILE`` beside it) is compiled into it and written into the jar
(``spark_udfs.jvm``), which refuses a library of another build."""
from __future__ import annotations

import glob
import hashlib
import os
import shutil
import sys

LIBRARY = "libpykbatch_jni.so"
VERSION_FILE = "libpykbatch_jni.version"
NO_JDK = ("pykbatch: no JDK found (jni.h under $JAVA_HOME/include or beside javac): Spark will run "
          "pykbatch's Python functions; install a JDK 17+ and reinstall for the JVM path")


def jdk_include() -> str | None:
    """The include directory of a JDK: $JAVA_HOME's, else the one beside ``javac`` on PATH."""
    homes = [os.environ.get("JAVA_HOME")]
    javac = shutil.which("javac")
    if javac:
        homes.append(os.path.dirname(os.path.dirname(os.path.realpath(javac))))
    for home in filter(None, homes):
        if os.path.exists(os.path.join(home, "include", "jni.h")):
            return os.path.join(home, "include")
    return None


def build_id(root: str, version: str) -> str:
    """pykbatch's version and a digest of every C source the library is built from."""
    digest = hashlib.sha256()
    for path in sorted(glob.glob(os.path.join(root, "csrc", "*.[ch]")) + glob.glob(os.path.join(root, "csrc", "*.def"))
                       + glob.glob(os.path.join(root, "csrc", "jni", "*.[ch]"))):
        digest.update(os.path.basename(path).encode())
        with open(path, "rb") as f:
            digest.update(f.read())
    return f"{version}+{digest.hexdigest()[:16]}"


def build_library(compiler, root: str, out_dir: str, version: str, extra_args=(), temp_dir: str = "build/jni") -> bool:
    """Compiles the shim and the core into out_dir/LIBRARY with setuptools' ``compiler`` (the one
    the extensions use: the wheels' cross compiler too).  False, with one line said, without a JDK."""
    include = jdk_include()
    if include is None:
        print(NO_JDK, file=sys.stderr)
        return False
    ident = build_id(root, version)
    sources = sorted(glob.glob(os.path.join(root, "csrc", "*.c"))) + sorted(glob.glob(os.path.join(root, "csrc", "jni",
                                                                                                 "*.c")))
    platform = os.path.join(include, "linux" if sys.platform.startswith("linux") else sys.platform)
    objects = compiler.compile(sources, output_dir=temp_dir, include_dirs=[os.path.join(root, "csrc"), include, platform],
                               macros=[("KB_JNI_VERSION", f'"{ident}"')],
                               extra_postargs=["-std=c11", "-O3", "-fPIC", "-fvisibility=default", *extra_args])
    os.makedirs(out_dir, exist_ok=True)
    compiler.link_shared_object(objects, os.path.join(out_dir, LIBRARY))
    with open(os.path.join(out_dir, VERSION_FILE), "w") as f:
        f.write(ident + "\n")
    return True
