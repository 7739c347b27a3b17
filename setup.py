"""Build of the native extension: csrc/*.c (the C core) + pykbatch/_native.pyx.

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

extension = Extension(
    "pykbatch._native",
    sources=["pykbatch/_native.pyx"] + sorted(glob.glob("csrc/*.c")),
    include_dirs=["csrc"],
    extra_compile_args=compile_args,
    extra_link_args=link_args,
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
)

setup(
    ext_modules=cythonize([extension], compiler_directives={"language_level": "3"},
                          include_path=["pykbatch"]),
)
