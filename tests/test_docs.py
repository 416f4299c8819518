"""The documentation's examples run, and every public name has an API page.

Every ```python block of README.md and docs/**/*.md runs here: a page's blocks
in order, in one fresh namespace, in a temporary working directory, so a
block may build on the ones above it. A block preceded by an HTML comment
names what it needs:

* `<!-- needs: trained-export -->`: a trained SavedModel at
  `saved_models/headlines/1`; these run in a slow test, on the suite's shared
  tiny trained run (`trained` in conftest.py), in order, apart from the page's
  other blocks.
* `<!-- needs: tensorflow -->`: TensorFlow itself; the page's test is then
  `tf_only`.

Pages under docs/summarizer/ are the summarizer's: `tf_only` too.

What a page shows is checked as it runs, statement by statement:

* `print(...)  # <output>`: the printed text is `<output>`, up to an
  explanation after `: ` (whitespace-insensitive);
* `name = ...  # (2, 3, 100)`: the shape of each assigned name, one
  parenthesised shape each (`a, b = ...  # (2, 6) (2, 5)`); a word in a
  shape (`batch`) stands for any size, a number or a product of numbers
  (`5 * 20`) must match.
"""

import ast
import contextlib
import io
import math
import pkgutil
import re
import tokenize
from pathlib import Path

import pytest

import keras_attn

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
EXPORT = "trained-export"
_FENCE = re.compile(
    r"^(?:<!-- needs: (?P<needs>[\w-]+) -->\n)?```python\n(?P<code>.*?)^```$",
    re.MULTILINE | re.DOTALL,
)
_API_LINE = re.compile(r"^::: keras_attn\.(\w+)\s*$", re.MULTILINE)
_SHAPE = re.compile(r"\(([^()]*)\)")
_SIZE = re.compile(r"^\d+(\s*\*\s*\d+)*$")


def python_blocks(page):
    """`(line, needs, code)` of each python block of `page`, in order."""
    text = page.read_text(encoding="utf-8")
    blocks = []
    for match in _FENCE.finditer(text):
        line = text.count("\n", 0, match.start("code")) + 1
        blocks.append((line, match.group("needs"), match.group("code")))
    return blocks


def run_blocks(page, blocks):
    namespace = {"__name__": "__docs__"}
    name = str(page.relative_to(ROOT))
    for line, _, code in blocks:
        # Blank lines in front, so that a traceback and a statement's line
        # numbers are the page's own.
        source = "\n" * (line - 1) + code
        comments = trailing_comments(source)
        for statement in ast.parse(source, name).body:
            module = ast.Module(body=[statement], type_ignores=[])
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(compile(module, name, "exec"), namespace)
            comment = comments.get(statement.end_lineno)
            if comment is not None:
                where = f"{name}:{statement.end_lineno}"
                check_shown(statement, comment, printed.getvalue(), namespace, where)
            print(printed.getvalue(), end="")


def trailing_comments(source):
    """`{line: text}` of the comments that follow code on their line."""
    comments, code_lines = {}, set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        row = token.start[0]
        if token.type == tokenize.COMMENT and row in code_lines:
            comments[row] = token.string.lstrip("#").strip()
        elif token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            code_lines.add(row)
    return comments


def check_shown(statement, comment, printed, namespace, where):
    """Fails where `statement`'s trailing `comment` is not what it shows."""
    value = statement.value if isinstance(statement, ast.Expr) else None
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "print"
    ):
        expected = comment.split(": ", 1)[0]
        assert " ".join(printed.split()) == " ".join(expected.split()), (
            f"{where} prints {printed!r}; the page shows {expected!r}"
        )
        return
    if not isinstance(statement, ast.Assign) or not comment.startswith("("):
        return
    target = statement.targets[0]
    names = target.elts if isinstance(target, ast.Tuple) else [target]
    shown = _leading_shapes(comment)
    for node, sizes in zip(names, shown, strict=False):
        assert isinstance(node, ast.Name), f"{where}: a shape shown for {node!r}"
        actual = tuple(namespace[node.id].shape)
        assert len(actual) == len(sizes) and all(
            size is None or size == got for size, got in zip(sizes, actual, strict=True)
        ), f"{where}: `{node.id}` has shape {actual}; the page shows {comment!r}"


def _size(text):
    """`"5 * 20"` -> 100."""
    return math.prod(int(factor) for factor in text.split("*"))


def _leading_shapes(comment):
    """The shapes a comment opens with, each a tuple of int or None (any)."""
    shapes, rest = [], comment
    while (match := _SHAPE.match(rest)) is not None:
        sizes = [size.strip() for size in match.group(1).split(",") if size.strip()]
        shapes.append(
            tuple(_size(size) if _SIZE.match(size) else None for size in sizes)
        )
        rest = rest[match.end() :].lstrip(", ")
    return shapes


def _page_params():
    params = []
    for page in PAGES:
        blocks = [b for b in python_blocks(page) if b[1] != EXPORT]
        if not blocks:
            continue
        tf_only = "summarizer" in page.parts or any(
            needs == "tensorflow" for _, needs, _ in blocks
        )
        marks = [pytest.mark.tf_only] if tf_only else []
        params.append(
            pytest.param(page, blocks, marks=marks, id=str(page.relative_to(ROOT)))
        )
    return params


@pytest.mark.parametrize("page, blocks", _page_params())
def test_page_examples_run(page, blocks, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_blocks(page, blocks)


def test_the_pages_have_examples_and_the_marks_are_known():
    needs = [b[1] for page in PAGES for b in python_blocks(page)]
    assert len(needs) >= 20
    assert set(needs) <= {None, EXPORT, "tensorflow"}
    assert needs.count(EXPORT) >= 2


@pytest.mark.slow
@pytest.mark.tf_only
def test_examples_on_a_trained_export_run(trained, tmp_path, monkeypatch):
    folder, result = trained
    assert result.returncode == 0, result.stderr[-2000:]
    (tmp_path / "saved_models").mkdir()
    (tmp_path / "saved_models" / "headlines").symlink_to(folder / "export")
    monkeypatch.chdir(tmp_path)
    ran = 0
    for page in PAGES:
        blocks = [b for b in python_blocks(page) if b[1] == EXPORT]
        run_blocks(page, blocks)
        ran += len(blocks)
    assert ran >= 2


def test_every_public_name_has_an_api_entry():
    documented = set()
    for page in (ROOT / "docs" / "api").glob("*.md"):
        documented |= set(_API_LINE.findall(page.read_text(encoding="utf-8")))
    missing = sorted(set(keras_attn.__all__) - documented)
    assert not missing, f"no `::: keras_attn.<name>` in docs/api/ for {missing}"
    modules = {info.name for info in pkgutil.iter_modules(keras_attn.__path__)}
    unknown = sorted(documented - set(keras_attn.__all__) - modules)
    assert not unknown, f"docs/api/ names what keras_attn does not export: {unknown}"


def _layout_paths():
    """The backticked paths in the first column of development.md's layout."""
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    table = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = [row.split("|")[1] for row in table.splitlines() if row.startswith("|")]
    return {p for first in rows for p in re.findall(r"`([^`]+)`", first)}


@pytest.mark.source_tree  # reads keras_attn/ and models/ as files
def test_the_layout_table_matches_the_tree():
    named = _layout_paths()
    assert "keras_attn/layers/" in named
    gone = sorted(p for p in named if not (ROOT / p).exists())
    assert not gone, f"docs/development.md's layout names missing paths: {gone}"
    modules = [*ROOT.glob("keras_attn/**/*.py"), *ROOT.glob("models/**/*.py")]
    unnamed = []
    for module in modules:
        path = module.relative_to(ROOT)
        if path.name in ("__init__.py", "__main__.py"):
            continue
        folders = {f"{parent.as_posix()}/" for parent in path.parents}
        if path.as_posix() not in named and not folders & named:
            unnamed.append(path.as_posix())
    assert not unnamed, f"docs/development.md's layout does not name {unnamed}"


@pytest.mark.parametrize(
    "page, limit", [("BENCHMARKS.md", 350), ("docs/history.md", 150)]
)
def test_the_figures_and_the_history_stay_short(page, limit):
    # Today's figures and the conclusions, not every run and its story: a page
    # past its limit has kept something that belongs in neither.
    lines = (ROOT / page).read_text(encoding="utf-8").count("\n")
    assert lines < limit, f"{page} has {lines} lines; keep it under {limit}"
