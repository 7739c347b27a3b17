"""Build of the native extensions: csrc/*.c (the C core) + pykbatch/_native.pyx, and
pykbatch/_catalogue.pyx (the core's tables of rules, error codes and codecs, for Python).

Environment switches for development builds:
  PYKBATCH_DEBUG=1      -O0 -g, assertions on
  PYKBATCH_SANITIZE=1   AddressSanitizer + UndefinedBehaviorSanitizer
"""
import glob
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

debug = os.environ.get("PYKBATCH_DEBUG") == "1"
sanitize = os.environ.get("PYKBATCH_SANITIZE") == "1"

compile_args = ["-std=c11", "-O0" if debug else "-O3", "-fvisibility=hidden", "-Wall"]
link_args = []
if debug or sanitize:
    compile_args += ["-g", "-UNDEBUG"]
if sanitize:
    flags = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"]
    compile_args += flags
    link_args += flags


def extension(name: str, sources: list) -> Extension:
    return Extension(name, sources=sources, include_dirs=["csrc"], extra_compile_args=compile_args,
                     extra_link_args=link_args)


extensions = [
    extension("pykbatch._native", ["pykbatch/_native.pyx"] + sorted(glob.glob("csrc/*.c"))),
    extension("pykbatch._catalogue", ["pykbatch/_catalogue.pyx", "csrc/kb_rules.c", "csrc/kb_kafka.c",
                                              "csrc/kb_render.c"]),
]

setup(
    ext_modules=cythonize(extensions, compiler_directives={"language_level": "3"},
                          include_path=["pykbatch"]),
)
