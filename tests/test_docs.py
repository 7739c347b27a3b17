"""The documentation site (docs/, mkdocs.yml): it builds with warnings as errors, and every example
in it runs — each page's ```python blocks in order, in one namespace per page (the Spark page's
with the test session's ``spark``), each ``$ `` line of its ```console blocks as a shell command
(exit status 0 or 1, the documented ones for "nothing wrong" and "damage found"; never a
traceback) — in a directory holding what the examples name: a partition ``orders-0/`` written as
a broker writes one, and files Kafka's own broker wrote (``__consumer_offsets-0/``...).  The Python
examples also pass ``mypy --strict``."""
from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.samples import write_partition

DOCS = ROOT / "docs"
PAGES = sorted(p.name for p in DOCS.glob("*.md"))
BLOCK = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.S | re.M)
BROKER_FILES = ROOT / "tests" / "kafka" / "broker-files"
SPARK_PAGES = {"spark.md"}
LIVE_PAGES = {"live.md", "produce.md", "copy.md"}  # need a broker: run by tests/test_live_spark.py, test_live_produce.py and test_live_copy.py against the session's
REGISTRY_PAGES = {"values.md"}  # need a schema registry (and Spark): run by tests/test_values_spark.py


def blocks(page: str, language: str) -> list[str]:
    return [code for lang, code in BLOCK.findall((DOCS / page).read_text()) if lang == language]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    write_partition(tmp_path / "orders-0", segments=2, batches=12)
    for name in ("__consumer_offsets-0", "__cluster_metadata-0", "txn-0"):
        shutil.copytree(BROKER_FILES / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_every_page_is_in_the_navigation_and_has_examples_or_generated_parts():
    nav = (ROOT / "mkdocs.yml").read_text()
    assert all(page in nav for page in PAGES), PAGES
    runnable = sum(len(blocks(p, "python")) + len(blocks(p, "console")) for p in PAGES)
    assert runnable >= 15, runnable  # (the block pattern still finds them)


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="needs mkdocs (the test extra)")
def test_the_site_builds_with_warnings_as_errors(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "WARNING" not in done.stderr, done.stderr[-3000:]
    site = tmp_path / "site"
    cli = (site / "cli.html").read_text()
    assert "usage: pykbatch validate" in cli and "usage: pykbatch tiered export" in cli  # generated
    checks = (site / "checks.html").read_text()
    assert checks.count("<tr>") >= 70 and "record.compacted_no_key" in checks
    api = (site / "api.html").read_text()
    assert "Check every batch and record of" in api and "drop_culprits" in api
    changelog = (site / "changelog.html").read_text()
    assert "Keep a Changelog" in changelog
    # opened from disk: links name files, and search needs no server (Material's offline plugin)
    index = (site / "index.html").read_text()
    assert 'href="getting-started.html"' in index and "search_index.js" in " ".join(os.listdir(site / "search"))
    # ... and fetch nothing: no page loads a script from the network (Material's CDN polyfill for
    # its search worker is dropped; javascripts/offline-search.js searches pages opened from disk)
    for page in site.glob("*.html"):
        assert not re.search(r'<script[^>]+src="https?://', page.read_text()), page.name
    assert 'src="javascripts/offline-search.js"' in index
    _offline_search_finds(site)
    # every signature in its own block, a parameter a line
    import html
    text = html.unescape(re.sub(r"<[^>]+>", "", api))
    assert "validate(\n    buf: _Buffer,\n    config: Optional[ValidationConfig] = None," in text


def _offline_search_finds(site) -> None:
    """The offline search over the built index, run by node: a query's words in every result."""
    import shutil
    if shutil.which("node") is None:
        return  # the page's script is still checked above; its search needs node to run here
    script = (f"const fs = require('fs'); eval(fs.readFileSync({json.dumps(str(site / 'search' / 'search_index.js'))}, "
              f"'utf8').replace('var __index', 'global.__index'));"
              f"const s = require({json.dumps(str(site / 'javascripts' / 'offline-search.js'))});"
              "console.log(JSON.stringify([s.search(__index, 'crc mismatch'), s.search(__index, 'zzqqxx none'),"
              " s.search(__index, '')]));")
    done = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    hits, none, empty = json.loads(done.stdout)
    assert len(hits) >= 3 and none == [] and empty == []
    assert all("crc" in (h["title"] + h["snippet"]).lower() for h in hits)
    assert any(h["location"].startswith("checks.html") for h in hits)


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a class or function inside a module
        return False


def test_the_api_reference_names_every_exported_name():
    import pykbatch
    page = (DOCS / "api.md").read_text()
    documented = set(re.findall(r"^::: ([\w.]+)$", page, re.M))
    modules = {name for name in documented if name in sys.modules or _is_module(name)}
    missing = [name for name in pykbatch.__all__
               if not any(d.split(".")[-1] == name for d in documented)
               and not any(getattr(getattr(pykbatch, name), "__module__", None) == m for m in modules)]
    assert not missing, missing


def test_the_cli_reference_fits_its_box():
    """The generated command reference wraps at 88 columns, what the page's code box shows."""
    sys.path.insert(0, str(DOCS))
    try:
        import hooks
    finally:
        sys.path.remove(str(DOCS))
    lines = hooks.cli_reference().splitlines()
    assert len(lines) > 100 and max(map(len, lines)) <= hooks.CLI_WIDTH, max(lines, key=len)


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p, "python")
                                  and p not in SPARK_PAGES | LIVE_PAGES | REGISTRY_PAGES])
def test_python_examples_run(page, workdir):
    namespace: dict = {"__name__": f"docs_{page[:-3]}"}
    with contextlib.redirect_stdout(io.StringIO()):
        for code in blocks(page, "python"):
            exec(compile(code, f"docs/{page}", "exec"), namespace)


@pytest.mark.spark
@pytest.mark.parametrize("page", sorted(SPARK_PAGES))
def test_spark_examples_run(page, workdir, spark):
    namespace: dict = {"__name__": f"docs_{page[:-3]}", "spark": spark}
    with contextlib.redirect_stdout(io.StringIO()):
        for code in blocks(page, "python"):
            exec(compile(code, f"docs/{page}", "exec"), namespace)


def transcript(code: str) -> list[tuple[str, list[str]]]:
    """A console block as (command, the output lines shown under it)."""
    out: list[tuple[str, list[str]]] = []
    for line in code.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out:
            out[-1][1].append(line)
    return out


def shows(expected: list[str], actual: str) -> bool:
    """Whether the documented output lines appear in the actual output, in order: a line ending
    in "…" is a prefix (the page cuts long lines so), a line "…" stands for any lines between."""
    lines = iter(actual.splitlines())
    for want in (w for w in expected if w.strip() != "…"):
        prefix = want.endswith("…")
        want = want[:-1].rstrip() if prefix else want
        if not any(line.startswith(want) if prefix else line == want for line in lines):
            return False
    return True


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p, "console") and p not in REGISTRY_PAGES])
def test_console_examples_run_and_print_what_the_page_shows(page, workdir):
    commands = [step for code in blocks(page, "console") for step in transcript(code)]
    assert commands
    bin_dir = os.path.dirname(sys.executable)  # where pip put the pykbatch command
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
    for command, expected in commands:
        if command.startswith(("pip install", "pip wheel")):
            continue  # installing is what the page describes, not what a test may do
        done = subprocess.run(["bash", "-c", command], cwd=workdir, capture_output=True, text=True, env=env,
                              timeout=300)
        assert done.returncode in (0, 1), (command, done.returncode, done.stderr[-2000:])
        assert "Traceback" not in done.stderr, (command, done.stderr[-2000:])
        assert done.stdout.strip() and expected, command  # every example shows something, and the page shows it
        assert shows(expected, done.stdout), (command, expected, done.stdout[:3000])


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="needs mypy (the test extra)")
def test_python_examples_pass_mypy_strict(tmp_path):
    files = []
    for page in PAGES:
        code = blocks(page, "python")
        if not code:
            continue
        spark_pages = SPARK_PAGES | LIVE_PAGES | REGISTRY_PAGES
        head = "from pyspark.sql import SparkSession\nspark: SparkSession\n" if page in spark_pages else ""
        head += "bootstrap: str\n" if page in LIVE_PAGES else ""  # the page's first block names it
        # the registry page's first block makes what its later ones use
        later = ("from pykbatch.values import SchemaRegistry, decode_values\nvalues: list[bytes | None]\n"
                 "registry: SchemaRegistry\n") if page in REGISTRY_PAGES else ""
        for i, block in enumerate(code):
            path = tmp_path / f"docs_{page[:-3].replace('-', '_')}_{i}.py"
            path.write_text(head + (later if i else "") + block)
            files.append(str(path))
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--config-file", str(ROOT / "pyproject.toml"),
                           "--no-incremental", "--follow-imports=silent", *files], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, MYPYPATH=str(ROOT)))  # an editable install hides the sources
    assert done.returncode == 0, done.stdout[-5000:]


def test_the_readmes_python_example_runs(workdir):
    code = BLOCK.findall((ROOT / "README.md").read_text())
    (python,) = [c for lang, c in code if lang == "python" and "spark" not in c and "pykbatch.live" not in c]
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(python, "README.md", "exec"), {"__name__": "readme"})


def test_the_readme_stays_short():
    """The README is the front page: 150 lines at most, the detail in docs/."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 150
