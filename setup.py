"""Build of the native extensions: csrc/*.c (the C core) + pykbatch/_native.pyx, and
pykbatch/_catalogue.pyx (the core's tables of rules, error codes and codecs, for Python).

Environment switches for development builds:
  PYKBATCH_DEBUG=1      -O0 -g, assertions on
  PYKBATCH_SANITIZE=1   AddressSanitizer + UndefinedBehaviorSanitizer
"""
import glob
import importlib.util
import os
from concurrent.futures import ThreadPoolExecutor

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

debug = os.environ.get("PYKBATCH_DEBUG") == "1"
sanitize = os.environ.get("PYKBATCH_SANITIZE") == "1"

compile_args = ["-std=c11", "-O0" if debug else "-O3", "-fvisibility=hidden", "-Wall",
                "-Werror=implicit-function-declaration"]  # an undeclared call links as a missing symbol
link_args = []
if debug or sanitize:
    compile_args += ["-g", "-UNDEBUG"]
else:
    # line tables only, over the interpreter's own -g: backtraces still name file:line, and the
    # 5 MB Cython module compiles in 25 s instead of 41
    compile_args += ["-g1"]
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
                                              "csrc/kb_render.c", "csrc/kb_verdict.c"]),
]



def _jvm_build():
    """spark_udfs/jvm_build.py, loaded by path: neither package is importable before this build."""
    spec = importlib.util.spec_from_file_location("_pykbatch_jvm_build", os.path.join("spark_udfs", "jvm_build.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _compile_in_parallel(compile_sources):
    """The compiler's ``compile``, one source per job on every core: the Cython module, the core
    and the JNI shim are ~30 independent translation units, and a serial build of each wheel and
    install is most of a minute the suite and every user wait through."""
    def compile(sources, *args, **kwargs):
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            batches = list(pool.map(lambda source: compile_sources([source], *args, **kwargs), sources))
        return [obj for objects in batches for obj in objects]
    return compile


class BuildWithJni(build_ext):
    """The extensions, then the JNI shim for Spark's JVM (spark_udfs/native/) where a JDK is found."""

    def build_extensions(self):
        self.compiler.compile = _compile_in_parallel(self.compiler.compile)
        super().build_extensions()

    def run(self):
        super().run()
        out = os.path.join("spark_udfs" if self.inplace else os.path.join(self.build_lib, "spark_udfs"), "native")
        version = self.distribution.get_version()
        _jvm_build().build_library(self.compiler, os.path.abspath("."), out, version,
                                   extra_args=[a for a in compile_args if a.startswith(("-g", "-fsanitize"))],
                                   temp_dir=os.path.join(self.build_temp, "jni"))


setup(
    cmdclass={"build_ext": BuildWithJni},
    ext_modules=cythonize(extensions, compiler_directives={"language_level": "3"},
                          include_path=["pykbatch"]),
)
