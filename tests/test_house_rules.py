"""The test suite's own rules, read from its source with `ast`.

No test module imports another (shared helpers live in modules named for
what they hold, fixtures in conftest.py), and no module under tests/ edits
`sys.path` (pyproject.toml's `pythonpath` puts the checkout's root and
tests/ on it).
"""

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
MODULES = sorted(TESTS.glob("*.py"))


def is_test_module(name):
    """Whether the dotted module `name` is a test module or conftest."""
    parts = name.split(".")
    if parts[0] == "tests":
        parts = parts[1:]
    return bool(parts) and (parts[0].startswith("test_") or parts[0] == "conftest")


def imported_test_modules(source):
    """The test modules (and conftest) that `source` imports, in order."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if is_test_module(a.name)]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if is_test_module(base):
                found.append(base)
            elif base in ("", "tests"):
                # `from tests import test_x`, `from . import test_x`.
                found += [a.name for a in node.names if is_test_module(a.name)]
    return found


def sys_path_uses(source):
    """Line numbers where `source` reads or edits `sys.path`."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute)
        and node.attr == "path"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    ]


@pytest.mark.parametrize(
    "source, expected",
    [
        ("import test_a", ["test_a"]),
        ("import numpy, test_a as a", ["test_a"]),
        ("from test_a import b", ["test_a"]),
        ("from tests.test_a import b", ["tests.test_a"]),
        ("from tests import test_a, e2e", ["test_a"]),
        ("from . import test_a", ["test_a"]),
        ("from conftest import SPECS", ["conftest"]),
        ("def f():\n    import test_a", ["test_a"]),
        ("import e2e\nfrom toy_summarizer import tiny_batch", []),
        ("from models import testing, test_utils_x", []),
    ],
)
def test_the_import_check_finds_test_modules(source, expected):
    assert imported_test_modules(source) == expected


def test_the_sys_path_check_finds_edits():
    source = "import sys\nx = 1\nsys.path.insert(0, 'a')\nprint(sys.argv)\n"
    assert sys_path_uses(source) == [3]


def test_the_suite_has_modules_to_check():
    names = {p.name for p in MODULES}
    assert {"conftest.py", "test_house_rules.py", "e2e.py"} <= names


def test_no_module_imports_a_test_module():
    imports = {p.name: imported_test_modules(p.read_text("utf-8")) for p in MODULES}
    offenders = {name: found for name, found in imports.items() if found}
    assert offenders == {}, (
        "Move what these modules import from test modules into a helper "
        "module named for what it holds, or a fixture into conftest.py"
    )


def test_no_module_edits_sys_path():
    lines = {p.name: sys_path_uses(p.read_text("utf-8")) for p in MODULES}
    offenders = {name: found for name, found in lines.items() if found}
    assert offenders == {}, (
        "These modules use `sys.path` (on the lines listed): pyproject.toml's "
        "`pythonpath` puts the checkout's root and tests/ on it"
    )
