"""The summarizer's stages import only earlier stages, read with `ast`.

`models/` is one folder per stage, in the order data flows through them
(`STAGES`); a module imports from its own stage or an earlier one, never a
later one. `models.pipeline` (what `train.py` runs) and the command-line
tools of `models/tools/` come after every stage. Nothing of `models/`
imports the server (`serving/`), the server imports only the settings and
the export's client, and `keras_attn` imports nothing of the summarizer or
the papers.
"""

import ast
import re
from pathlib import Path

import pytest

import models

ROOT = Path(__file__).resolve().parent.parent
STAGES = (
    "settings",
    "text",
    "data",
    "scoring",
    "model",
    "decoding",
    "training",
    "evaluation",
    "export",
)
# After every stage: what train.py runs, then the tools around a run.
LAST = ("pipeline", "tools")
ORDER = {name: rank for rank, name in enumerate(STAGES + LAST)}
SERVER_ALLOWED = ("models.settings", "models.decoding.saved_model_client")


def imported_modules(source):
    """The dotted modules that `source` imports, anywhere in it (function
    bodies too); `from a import b` counts as `a.b`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found += [f"{node.module}.{a.name}" for a in node.names]
    return found


def stage_of(module):
    """The stage (or `LAST` entry) that the dotted `models.` name belongs to,
    or None for `models` itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def backward_imports(module, imports):
    """The `models.` imports of `module` that name a later stage."""
    rank = ORDER[stage_of(module)]
    return [
        name
        for name in imports
        if name.startswith("models.") and ORDER.get(stage_of(name), -1) > rank
    ]


def module_name(path):
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources(folder):
    return {
        module_name(p): p.read_text("utf-8")
        for p in sorted((ROOT / folder).rglob("*.py"))
    }


@pytest.mark.parametrize(
    "source, expected",
    [
        ("import models.text", ["models.text"]),
        ("from models import data, text as t", ["models.data", "models.text"]),
        ("from models.training import fit", ["models.training.fit"]),
        ("def f():\n    from models.export import x", ["models.export.x"]),
        ("from . import x\nimport numpy", ["numpy"]),
    ],
)
def test_the_import_reader_finds_imports(source, expected):
    assert imported_modules(source) == expected


def test_a_later_stage_is_a_backward_import():
    imports = ["models.settings.errors", "models.data", "models.training.fit"]
    assert backward_imports("models.data.batches", imports) == ["models.training.fit"]
    assert backward_imports("models.pipeline", imports) == []


def test_every_module_is_in_a_stage():
    loose = [
        name
        for name in sources("models")
        if name != "models" and stage_of(name) not in ORDER
    ]
    assert loose == [], f"Put these modules in one of the stages {STAGES}"


def test_the_package_names_its_stages_in_order():
    bullets = re.finditer(r"^\* `(\w+)/`", models.__doc__, re.M)
    assert [m.group(1) for m in bullets] == list(STAGES)


def test_stages_import_only_earlier_stages():
    offenders = {
        name: found
        for name, source in sources("models").items()
        if name != "models"
        and (found := backward_imports(name, imported_modules(source)))
    }
    assert offenders == {}, (
        "These modules import a later stage: move what they need to the "
        "earlier stage, or the module to the later one"
    )


def test_models_imports_nothing_of_the_server():
    offenders = {
        name: [m for m in imported_modules(source) if m.split(".")[0] == "serving"]
        for name, source in sources("models").items()
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_server_imports_only_the_settings_and_the_client():
    offenders = {
        name: [
            m
            for m in imported_modules(source)
            if m.split(".")[0] == "models" and not m.startswith(SERVER_ALLOWED)
        ]
        for name, source in sources("serving").items()
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_library_imports_nothing_of_the_summarizer_or_the_papers():
    offenders = {
        name: [
            m
            for m in imported_modules(source)
            if m.split(".")[0] in ("models", "papers", "serving")
        ]
        for name, source in sources("keras_attn").items()
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def import_graph(modules):
    """Each module of `modules` (dotted name to source) to the modules of
    `modules` it imports; `from a import b` counts as `a.b` if that is a
    module, else as `a`."""

    def resolve(name):
        parts = name.split(".")
        for end in range(len(parts), 0, -1):
            if (prefix := ".".join(parts[:end])) in modules:
                return prefix
        return None

    return {
        name: {
            found
            for imported in imported_modules(source)
            if (found := resolve(imported)) not in (None, name)
        }
        for name, source in modules.items()
    }


def import_cycles(graph):
    """The cycles of `graph` (module to imported modules), each as the list of
    its modules, found by depth-first search."""
    cycles, done = [], set()

    def visit(name, path):
        if name in path:
            cycles.append(path[path.index(name) :])
            return
        if name in done:
            return
        for imported in sorted(graph[name]):
            visit(imported, [*path, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    return cycles


def test_the_cycle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_no_two_modules_of_the_summarizer_import_each_other():
    # Function-body imports count: a circle hidden in a function still ties
    # the two modules together (the export's SavedModel and ONNX writers did).
    assert import_cycles(import_graph(sources("models"))) == []
