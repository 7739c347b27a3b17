"""What a user sees of the package itself: its version (from git tags, through setuptools-scm),
``pykbatch --version``, and type stubs that match the compiled module."""
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

import pykbatch
from pykbatch.commands import main
from tests.conftest import ROOT

# PEP 440, as setuptools-scm writes it (release, .devN, +local)
PEP440 = re.compile(r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?(\+[a-z0-9.]+)?$")


def test_the_version_is_the_installed_distributions(capsys):
    assert PEP440.match(pykbatch.__version__), pykbatch.__version__
    # the same release as the installed distribution's metadata (an editable install's metadata
    # keeps the .devN of its install while a later in-place build rewrites _version.py)
    installed = importlib.metadata.version("pykbatch")
    assert pykbatch.__version__.split(".dev")[0] == installed.split(".dev")[0], (pykbatch.__version__, installed)
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    line = capsys.readouterr().out
    assert line.startswith(f"pykbatch {pykbatch.__version__} (CRC-32C ") and line.count("\n") == 1
    assert f"{pykbatch.native_info()['rules']} rules" in line


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.skipif(importlib.util.find_spec("setuptools_scm") is None, reason="needs setuptools-scm (the test extra)")
def test_a_release_tag_is_the_version(tmp_path):
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an unpacked sdist carries its version in PKG-INFO)")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "tag", "-a", "v9.8.7", "-m", "release"], check=True)

    def version():
        return subprocess.run([sys.executable, "-m", "setuptools_scm"], cwd=clone, check=True,
                              capture_output=True, text=True).stdout.strip()
    assert version() == "9.8.7"
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "after the release"], check=True)
    after = version()
    assert after.startswith("9.8.8.dev1+") and PEP440.match(after), after


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="needs mypy (the test extra)")
def test_the_stubs_match_the_compiled_modules():
    done = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "--mypy-config-file", str(ROOT / "pyproject.toml"),
         "--allowlist", str(ROOT / "tests" / "stubtest_allowlist.txt"), "pykbatch._native", "pykbatch._catalogue"],
        cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("build") is None, reason="needs build (the test extra)")
def test_the_sdist_builds_the_same_version_without_git(tmp_path):
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the sdist is made from one")
    sdist = tmp_path / "sdist"
    made = subprocess.run([sys.executable, "-m", "build", "--sdist", "-o", str(sdist), str(ROOT)],
                          capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    (archive,) = sdist.glob("pykbatch-*.tar.gz")
    version = archive.name[len("pykbatch-"):-len(".tar.gz")]
    import tarfile
    with tarfile.open(archive) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"PKG-INFO", "setup.py", "pykbatch/_native.pyx", "csrc/kb_v2.c", "csrc/kb_rules.def",
            "pykbatch/_version.py"} <= names
    wheels = tmp_path / "wheels"  # built from the unpacked sdist: no .git there
    # -O0 (PYKBATCH_DEBUG): what is shown is that the sdist holds all a build needs, not its speed
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(archive)],
                           capture_output=True, text=True, timeout=900, env=dict(os.environ, PYKBATCH_DEBUG="1"))
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = wheels.glob("*.whl")
    assert wheel.name.startswith(f"pykbatch-{version}-"), (wheel.name, version)
