"""The size and privacy rules of the project's code, read from its source
with `ast`.

No function over 80 lines of code (its docstring, the API's reference with
its `Example:`, not counted), no module over 600 lines, and no private name
(`_x`) of one of the project's modules used from another: imported
(`from models.x import _y`) or read off the module (`x._y`). The
summarizer's and the server's files are written whole or not at all, through
`models.settings.json_files`: no other module there writes a file in place.
"""

import ast
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.source_tree

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ("keras_attn/", "models/", "serving/", "papers/", "examples/", "benchmarks/")
CHECKED += ("tests/", "train.py")
# The project's own top-level packages and modules: private names of
# anything else (the standard library's, Keras') are not the project's.
PROJECT = ("models", "serving", "papers", "examples", "benchmarks", "keras_attn")
# A named tuple's public API, underscored so as not to clash with fields.
NAMED_TUPLE_API = {"_fields", "_asdict", "_replace", "_make", "_field_defaults"}
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600
WRITES_CHECKED = ("models/", "serving/", "train.py")
# The writes left in place: of files no later run reads back, or inside a
# temporary folder that takes its name whole.
WRITES_ALLOWED = {
    "models/settings/json_files.py": {"open"},  # the writer itself
    "models/evaluation/heatmap.py": {"open"},  # a picture
    "models/settings/version_folders.py": {"write_text"},  # in the temporary folder
    "models/data/offline.py": {"open"},  # the lock, nothing written in it
    # In a temporary folder, renamed when whole.
    "models/data/arrays.py": {"open", "write_bytes", "write_text"},
}


def checked_files():
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.split()
    return [ROOT / name for name in listed if name.startswith(CHECKED)]


def code_lines(function):
    """A function's lines after its `def` line, its docstring left out."""
    length = function.end_lineno - function.lineno
    first = function.body[0]
    if ast.get_docstring(function) is not None:
        length -= first.end_lineno - first.lineno + 1
    return length


def long_functions(source, most=MAX_FUNCTION_LINES):
    """`(name, line, length)` of each function of `source` longer than `most`."""
    return [
        (node.name, node.lineno, code_lines(node))
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and code_lines(node) > most
    ]


def _is_private(name):
    return (
        name.startswith("_")
        and not name.startswith("__")
        and name not in NAMED_TUPLE_API
    )


def _is_project(module):
    return module.split(".")[0] in PROJECT


def private_uses(source):
    """`(line, what)` of each private name of a project module that `source`
    imports or reads off an imported project module."""
    tree = ast.parse(source)
    modules, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if _is_project(a.name)}
        elif isinstance(node, ast.ImportFrom) and _is_project(node.module or ""):
            for alias in node.names:
                if _is_private(alias.name):
                    found.append((node.lineno, f"{node.module}.{alias.name}"))
                modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            if ast.unparse(node.value) in modules:
                found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def direct_writes(source):
    """`(line, call)` of each call of `source` that writes a file in place:
    `open` in a writing mode, `write_text`, `write_bytes`, `json.dump`,
    `np.save` or `np.savez` (Keras' and `tf.data`'s own `save` are not
    looked at)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        call = ast.unparse(node.func)
        if call == "open":
            modes = [
                *node.args[1:2],
                *(k.value for k in node.keywords if k.arg == "mode"),
            ]
            writing = any(
                isinstance(m, ast.Constant) and set(str(m.value)) & set("wax+")
                for m in modes
            )
        else:
            writing = call in ("json.dump", "np.save", "np.savez") or (
                call.endswith((".write_text", ".write_bytes"))
            )
        if writing:
            found.append((node.lineno, call.rsplit(".", 1)[-1]))
    return sorted(found)


def test_the_function_check_measures_from_def_to_last_line():
    body = "".join(f"    x = {i}\n" for i in range(80))
    assert long_functions(f"def fits():\n{body}") == []
    assert long_functions(f"def too_long():\n{body}    x = 80\n") == [
        ("too_long", 1, 81)
    ]
    # A docstring is the function's reference, not its code.
    doc = '    """Says what it does.\n\n    Example:\n        fits()\n    """\n'
    assert long_functions(f"def documented():\n{doc}{body}") == []
    assert long_functions(f"def documented():\n{doc}{body}    x = 80\n") == [
        ("documented", 1, 81)
    ]


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from models.data import _lock", [(1, "models.data._lock")]),
        ("from models.data import offline\noffline._lock()", [(2, "offline._lock")]),
        ("import papers.units as u\nu._run()", [(2, "u._run")]),
        ("import argparse\nargparse._HelpAction", []),
        ("from models.data import offline\nself._x, offline.lock()", []),
        ("from models import text\ntext.__name__", []),
        (
            "from keras_attn.search import DecodingResult\nDecodingResult._fields",
            [],
        ),
    ],
)
def test_the_privacy_check_finds_project_private_names(source, expected):
    assert private_uses(source) == expected


@pytest.mark.parametrize(
    "source, expected",
    [
        ("open(p, 'w').write(x)\nopen(p).read()\nopen(p, mode='a')", [1, 3]),
        ("p.write_text(x)\njson.dump(v, f)\njson.dumps(v)\nnp.save(p, a)", [1, 2, 4]),
        ("model.save(p)\np.read_text()\nnp.load(p)", []),
    ],
)
def test_the_write_check_finds_files_written_in_place(source, expected):
    assert [line for line, _ in direct_writes(source)] == expected


def test_the_summarizer_writes_its_files_whole():
    found = {
        name: [
            (line, call)
            for line, call in direct_writes(p.read_text("utf-8"))
            if call not in WRITES_ALLOWED.get(name, ())
        ]
        for p in checked_files()
        if (name := p.relative_to(ROOT).as_posix()).startswith(WRITES_CHECKED)
    }
    assert {name: f for name, f in found.items() if f} == {}


def test_there_are_files_to_check():
    names = {p.relative_to(ROOT).as_posix() for p in checked_files()}
    assert {"train.py", "models/pipeline.py", "tests/test_code_rules.py"} <= names
    assert {"keras_attn/search/strategies.py", "benchmarks/peer_opennmt.py"} <= names


def test_no_function_is_over_80_lines():
    found = {
        p.relative_to(ROOT).as_posix(): long_functions(p.read_text("utf-8"))
        for p in checked_files()
    }
    assert {name: f for name, f in found.items() if f} == {}


def test_no_module_is_over_600_lines():
    lengths = {
        p.relative_to(ROOT).as_posix(): p.read_text("utf-8").count("\n")
        for p in checked_files()
    }
    assert {n: k for n, k in lengths.items() if k > MAX_MODULE_LINES} == {}


def test_no_module_uses_another_modules_private_names():
    found = {
        p.relative_to(ROOT).as_posix(): private_uses(p.read_text("utf-8"))
        for p in checked_files()
    }
    assert {name: f for name, f in found.items() if f} == {}
