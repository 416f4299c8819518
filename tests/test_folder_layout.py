"""A run folder's and an export's file names live in `models.settings.folder_layout`
alone: no other module of `models/` (nor `train.py`) spells one as a string."""

import ast
from pathlib import Path

from models.settings import folder_layout

ROOT = Path(__file__).resolve().parent.parent
LAYOUT = ROOT / "models" / "settings" / "folder_layout.py"
# "teacher", "risk" and "heatmaps" are left out: they are also a
# distillation target, a progress bar's metric and a key of `metrics.json`.
NAMES = {
    "model.keras",
    "config.json",
    "vocab.txt",
    "search_options.json",
    "search_tuning.json",
    "metrics.json",
    "train_options.json",
    "best.weights.h5",
    "latest.weights.h5",
    "backup",
    "callback_state.json",
    "training_metadata.json",
    "training_end.json",
    "training.json",
    "data_source.json",
    "state.json",
    "member-",
    "logs",
    "saved_model.pb",
}


def _docstrings(tree):
    """The string constants that are docstrings (of modules, classes, functions)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(
            node,
            (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef),
        ):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                found.add(id(body[0].value))
    return found


def layout_names_in(source):
    """`(line, text)` of the string constants of `source` (docstrings left
    out) that name one of `NAMES`, whole or as one part of a `/` path."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    hits = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and NAMES.intersection(node.value.split("/"))
        ):
            hits.append((node.lineno, node.value))
    return sorted(hits)


def test_every_name_is_a_constant_of_folder_layout():
    values = {
        v for k, v in vars(folder_layout).items() if k.isupper() and isinstance(v, str)
    }
    assert NAMES <= values
    assert {"teacher", "risk", "heatmaps"} <= values


def test_the_check_finds_a_name_in_code_and_not_in_a_docstring():
    source = (
        '"""Writes model.keras."""\n'
        "def f(run_dir):\n"
        '    """Reads `config.json`."""\n'
        '    return run_dir / "backup" / "training_metadata.json"\n'
        'GLOB = f"{PREFIX}*/model.keras"\n'
    )
    assert layout_names_in(source) == [
        (4, "backup"),
        (4, "training_metadata.json"),
        (5, "*/model.keras"),
    ]


def test_no_module_spells_a_layout_name_but_folder_layout():
    sources = [*sorted((ROOT / "models").rglob("*.py")), ROOT / "train.py"]
    found = {
        str(path.relative_to(ROOT)): hits
        for path in sources
        if path != LAYOUT and (hits := layout_names_in(path.read_text()))
    }
    assert found == {}
    assert layout_names_in(LAYOUT.read_text())
