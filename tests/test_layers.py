"""The layers ARCHITECTURE.md draws, read from the source: the import graph (with ``ast``, imports
inside functions included; the compiled module's imports from its .pyx and the .pxi files it
includes) runs downward only -- each module is in a layer (``LAYERS``) and imports nothing of a
layer above it --, has no cycle between modules nor between folders, the library never imports the
command layer nor Spark, only the wire seam touches kafka-python, and no module outside the
catalogue invents a rule id."""
from __future__ import annotations

import ast
import pathlib
import re

import pytest

from pykbatch.rules import BY_ID

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("pykbatch", "spark_udfs")
COMMANDS = "pykbatch.commands"
ENTRY_POINTS = {"pykbatch.__main__"}  # `python -m pykbatch` runs the command line


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, pathlib.Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            found[module_name(path)] = path
        for path in (ROOT / package).glob("*.pyx"):
            found[module_name(path)] = path
    return found


def cython_source(path: pathlib.Path) -> str:
    text = path.read_text()
    return text + "".join((path.parent / name).read_text() for name in re.findall(r'^include "(\w+\.pxi)"', text, re.M))


def absolute(path: pathlib.Path, level: int, module: str | None) -> str:
    """The module a ``from ... import`` names, relative ones resolved against the file's package."""
    if not level:
        return module or ""
    package = module_name(path).split(".")
    package = package[:len(package) - level] if path.name != "__init__.py" else package[:len(package) - level + 1]
    return ".".join(package + ([module] if module else []))


def imports_of(path: pathlib.Path, known: set[str]) -> set[str]:
    """The modules a file imports, at module level or inside functions.  ``from pkg import name``
    is an arrow to ``pkg.name`` when that is a module, else to ``pkg`` (a name its __init__ defines)."""
    pairs: list[tuple[str, str | None]] = []
    if path.suffix == ".pyx":
        pairs = re.findall(r"^\s*from ([\w.]+) import (\w+)", cython_source(path), re.M)
        pairs += [(m, None) for m in re.findall(r"^\s*import ([\w.]+)", cython_source(path), re.M)]
    else:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                pairs += [(a.name, None) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                pairs += [(absolute(path, node.level, node.module), a.name) for a in node.names]
    out = set()
    for module, name in pairs:
        target = f"{module}.{name}" if name and f"{module}.{name}" in known else module
        if target in known:
            out.add(target)
    return out


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports_of(path, set(found)) - {name} for name, path in found.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


# Lowest first: a module imports modules of its own layer or below.  A module's layer is the one
# naming its longest prefix.  Inside a layer, folders never import each other both ways.
LAYERS = (
    ("the catalogue and the words every layer uses",
     ("pykbatch._catalogue", "pykbatch._version", "pykbatch.rules", "pykbatch.errors", "pykbatch.config",
      "pykbatch.result", "pykbatch.codecs", "pykbatch.columns", "pykbatch.retry", "pykbatch.progress",
      "pykbatch.parallel", "pykbatch.policy", "pykbatch.schemas")),
    ("the core bindings", ("pykbatch._native",)),
    ("functions over the core", ("pykbatch.arrow", "pykbatch.samples")),
    ("Kafka's formats and value types", ("pykbatch.kafka",)),
    ("files and stores", ("pykbatch.log", "pykbatch.topics", "pykbatch.tiered", "pykbatch.repair")),
    ("live clusters, values, dumps", ("pykbatch.live", "pykbatch.values", "pykbatch.dump")),
    ("the public API and old import paths", ("pykbatch", "pykbatch.audit", "pykbatch.export",
                                            "pykbatch.producer_state")),
    ("commands", ("pykbatch.commands", "pykbatch.__main__")),
    ("Spark", ("spark_udfs",)),
)
# the only modules that import kafka-python (the connection layer): the wire seam
KAFKA_PYTHON_SEAM = frozenset(("pykbatch.live.cluster", "pykbatch.live.frames", "pykbatch.live.protocol"))


def layer_of(module: str) -> int:
    best, rank = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), i
    if rank is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS (and to ARCHITECTURE.md)")
    return rank


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} ({LAYERS[layer_of(m)][0]}) imports {d} ({LAYERS[layer_of(d)][0]})"
                  for m, deps in graph.items() for d in deps if layer_of(d) > layer_of(m))


def folder_of(module: str, paths: dict[str, pathlib.Path] | None = None) -> str:
    """A module's folder: its package for a module in a sub-package, the module itself at the top
    of pykbatch (each such file is a room of its own)."""
    parts = module.split(".")
    if parts[0] == "spark_udfs":
        return "spark_udfs"
    return ".".join(parts[:2])


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for m, deps in graph.items():
        out.setdefault(folder_of(m), set()).update(folder_of(d) for d in deps if folder_of(d) != folder_of(m))
    for deps in list(out.values()):
        for d in deps:
            out.setdefault(d, set())
    return out


def kafka_python_imports(path: pathlib.Path) -> set[str]:
    """The kafka-python modules a file imports (``kafka`` / ``kafka.*``), inside functions too."""
    if path.suffix == ".pyx":
        text = cython_source(path)
        return set(re.findall(r"^\s*(?:from|import) (kafka(?:\.[\w.]+)?)\b", text, re.M))
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
        found.update(n for n in names if n == "kafka" or n.startswith("kafka."))
    return found


def test_the_graph_sees_the_layers(graph):
    """The reader finds what it must: the compiled module's imports, the command modules', Spark's,
    and imports inside functions."""
    assert "pykbatch.result" in graph["pykbatch._native"]
    assert "pykbatch.commands.tiered" in graph["pykbatch.commands.main"]
    assert "pykbatch.log" in graph["spark_udfs.segment_source"]
    assert "pykbatch.live.topic_limits" in graph["pykbatch.live.reader"]  # imported inside a method


def test_every_import_runs_downward(graph):
    assert upward_imports(graph) == []


def test_an_upward_import_would_be_found(graph):
    planted = {m: set(d) for m, d in graph.items()}
    planted["pykbatch._native"].add("pykbatch.kafka.control")
    assert upward_imports(planted) == ["pykbatch._native (the core bindings) imports pykbatch.kafka.control "
                                       "(Kafka's formats and value types)"]


def test_no_two_folders_import_each_other(graph):
    assert cycles(folder_graph(graph)) == []


def test_a_folder_cycle_behind_a_lazy_import_would_be_found(graph, tmp_path):
    fake = tmp_path / "dump.py"
    fake.write_text("import pykbatch.log\n\ndef show():\n    from pykbatch.tiered import metadata\n")
    planted = {m: set(d) for m, d in graph.items()}
    planted["pykbatch.log.fake"] = imports_of(fake, set(graph) | {"pykbatch.tiered.metadata"}) - {"pykbatch.log"}
    assert planted["pykbatch.log.fake"] == {"pykbatch.tiered.metadata"}  # the import inside the function
    assert [c for c in cycles(folder_graph(planted)) if "pykbatch.log" in c] == [["pykbatch.log", "pykbatch.tiered"]]


def test_only_the_wire_seam_touches_kafka_python():
    strangers = {f"{name}: {', '.join(sorted(found))}" for name, path in modules().items()
                 if name not in KAFKA_PYTHON_SEAM and (found := kafka_python_imports(path))}
    assert strangers == set()


def test_a_kafka_python_import_outside_the_seam_would_be_found(tmp_path):
    fake = tmp_path / "reader.py"
    fake.write_text("import pykbatch.kafka.control\n\ndef fetch():\n    from kafka.protocol.consumer import FetchRequest\n")
    assert kafka_python_imports(fake) == {"kafka.protocol.consumer"}  # not pykbatch.kafka


def test_the_import_graph_has_no_cycle(graph):
    assert cycles(graph) == []


def test_a_cycle_would_be_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_library_and_spark_never_import_a_command(graph):
    arrows = [(m, d) for m, deps in graph.items() for d in deps
              if (d == COMMANDS or d.startswith(COMMANDS + ".")) and not m.startswith(COMMANDS)
              and m not in ENTRY_POINTS]
    assert arrows == []


def test_the_library_never_imports_spark(graph):
    assert [(m, d) for m, deps in graph.items() if m.startswith("pykbatch")
            for d in deps if d.startswith("spark_udfs")] == []


RULE_PREFIXES = sorted({rule_id.split(".")[0] for rule_id in BY_ID if "." in rule_id})
RULE_ID = re.compile(rf"^(?:{'|'.join(RULE_PREFIXES)})\.[a-z0-9_]+$")
STRING = re.compile(r"""["']((?:%s)\.[a-z0-9_]+)["']""" % "|".join(RULE_PREFIXES))


def rule_like_strings(path: pathlib.Path) -> set[str]:
    if path.suffix == ".pyx":
        return set(STRING.findall(cython_source(path)))
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and RULE_ID.match(node.value):
            found.add(node.value)
    return found


def test_no_module_outside_the_catalogue_defines_a_rule_id():
    """Every string in product code shaped like a rule id (a catalogue prefix, a dot, a name) is
    a rule of csrc/kb_rules.def: a rule is added there, never by a module that reports it."""
    from tests.test_catalogue import kafka_property_names  # Kafka's names ("batch.size") look alike
    properties = kafka_property_names()
    strangers = {f"{path.relative_to(ROOT)}: {s}" for path in modules().values() for s in rule_like_strings(path)
                 if s not in BY_ID and not s.endswith(".py") and s not in properties}
    assert strangers == set()


def test_a_stranger_rule_id_would_be_found(tmp_path):
    fake = tmp_path / "fake.py"
    fake.write_text('FAULT = "redpanda.header_size"\nOK = "redpanda.header_crc"\n')
    assert rule_like_strings(fake) == {"redpanda.header_size", "redpanda.header_crc"}
    assert "redpanda.header_crc" in BY_ID and "redpanda.header_size" not in BY_ID


def test_rules_are_built_only_by_the_catalogue_view():
    builders = [str(p.relative_to(ROOT)) for p in modules().values() if p.suffix == ".py"
                and p.name != "rules.py" and re.search(r"\bRule\(", p.read_text())]
    assert builders == []


ARROW_TYPES = frozenset(("bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32",
                         "float64", "string", "large_string", "binary", "large_binary", "binary_view", "string_view",
                         "timestamp", "date32", "dictionary", "list_", "struct"))
SCHEMA_BUILDERS = frozenset(("schema", "struct", "field", "list_", "dictionary"))
COLUMNS = ROOT / "pykbatch" / "columns.py"


def _pa_call(node, names) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "pa")


def schemas_with_literal_types(path: pathlib.Path) -> list[str]:
    """``pa.schema/struct/field/...`` calls whose arguments name an Arrow type themselves (line numbers)."""
    if path.suffix == ".pyx":
        text = cython_source(path)
        return [line.strip() for line in text.splitlines()
                if re.search(r"pa\.(schema|struct|field)\(.*pa\.(%s)\(" % "|".join(ARROW_TYPES), line)]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if _pa_call(node, SCHEMA_BUILDERS):
            args = [*node.args, *(k.value for k in node.keywords)]
            if any(_pa_call(inner, ARROW_TYPES) for arg in args for inner in ast.walk(arg)):
                found.append(f"line {node.lineno}")
    return found


def test_no_module_outside_columns_builds_an_output_schema_from_literal_types():
    """Every output's Arrow types come from pykbatch/columns.py: a schema, struct or field built
    elsewhere takes its types from there (``fields(...)``, ``columns.X``), never ``pa.int64()``."""
    strangers = {f"{path.relative_to(ROOT)} {where}" for path in modules().values() if path != COLUMNS
                 for where in schemas_with_literal_types(path)}
    assert strangers == set()


def test_a_literal_schema_would_be_found(tmp_path):
    fake = tmp_path / "fake.py"
    fake.write_text('import pyarrow as pa\nS = pa.schema([pa.field("id", pa.int64())])\nT = pa.schema(F)\n')
    assert schemas_with_literal_types(fake) == ["line 2", "line 2"]
    assert schemas_with_literal_types(COLUMNS)  # columns.py does build them: the one home
