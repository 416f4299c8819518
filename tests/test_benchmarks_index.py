"""`benchmarks/` holds the scripts behind BENCHMARKS.md's figures, and only those.

A script is a module of `benchmarks/` with a `__main__` block; the others
(`common`, `flops`, `opennmt_training_log`, ...) are helpers the scripts import. Every
script is cited in BENCHMARKS.md with its command, `python -m
benchmarks.<script>`, and indexed
in benchmarks/README.md; every script the pages cite exists; every
`python -m` command of the docs names a module of the checkout. The tests
read files only: they run on every backend, TensorFlow or not.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
# The pages whose commands must work today; docs/history.md and CHANGELOG.md
# tell of scripts that were removed, under their names of the time.
PAGES = [
    ROOT / "README.md",
    ROOT / "BENCHMARKS.md",
    BENCHMARKS / "README.md",
    *(p for p in sorted((ROOT / "docs").glob("**/*.md")) if p.name != "history.md"),
]
MAIN_BLOCK = re.compile(r'^if __name__ == "__main__":', re.MULTILINE)
# `python -m pkg.module` or `python -m pkg.folder.module`: (pkg, "folder.module").
COMMAND = re.compile(
    r"python3?\s+-m\s+(benchmarks|papers|models|examples)\.(\w+(?:\.\w+)*)"
)
CITED_FILE = re.compile(r"\bbenchmarks/(\w+)\.py\b")
RUN_BY_PATH = re.compile(r"python3?\s+((?:benchmarks|papers|examples)/\w+\.py)")


def _modules():
    return sorted(p for p in BENCHMARKS.glob("*.py") if p.name != "__init__.py")


def _scripts():
    return [p.stem for p in _modules() if MAIN_BLOCK.search(p.read_text())]


def _benchmarks_md():
    return (ROOT / "BENCHMARKS.md").read_text()


def test_the_rule_finds_the_scripts_and_the_helpers():
    scripts = _scripts()
    assert {"bench_layers", "load_test", "digits_dataset"} <= set(scripts)
    helpers = {p.stem for p in _modules()} - set(scripts)
    assert helpers == {
        *("common", "flops", "opennmt_training_log", "opennmt_copy_checks"),
        *("pytorch_fast", "tutorial_task", "unified_diff", "toy_reverse"),
        "checkpoint_tuning",
    }
    # A helper is there because a script imports it.
    sources = "\n".join((BENCHMARKS / f"{s}.py").read_text() for s in scripts)
    for helper in helpers:
        assert f"from benchmarks import {helper}" in sources or (
            f"from benchmarks.{helper} import" in sources
        ), helper


@pytest.mark.parametrize("script", _scripts())
def test_every_script_is_cited_with_its_command(script):
    cited = {
        name for pkg, name in COMMAND.findall(_benchmarks_md()) if pkg == "benchmarks"
    }
    assert script in cited, f"BENCHMARKS.md has no `python -m benchmarks.{script}`"
    index = (BENCHMARKS / "README.md").read_text()
    assert f"| `{script}` |" in index, f"benchmarks/README.md does not index {script}"


def test_every_cited_script_exists():
    text = _benchmarks_md() + (BENCHMARKS / "README.md").read_text()
    names = {name for pkg, name in COMMAND.findall(text) if pkg == "benchmarks"}
    names |= set(CITED_FILE.findall(text))
    missing = sorted(n for n in names if not (BENCHMARKS / f"{n}.py").is_file())
    assert not missing, f"cited but not in benchmarks/: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_docs_commands_name_modules_of_the_checkout(page):
    text = page.read_text()
    missing = sorted(
        f"{pkg}.{name}"
        for pkg, name in set(COMMAND.findall(text))
        if not (ROOT / pkg / f"{name.replace('.', '/')}.py").is_file()
        and not (ROOT / pkg / name.replace(".", "/") / "__main__.py").is_file()
    )
    assert not missing, f"{page.name} runs modules that do not exist: {missing}"
    # The scripts import their package (`from benchmarks import common`), so
    # they run as modules, never by path.
    assert not RUN_BY_PATH.findall(text), page.name


def test_no_script_edits_sys_path():
    for folder in ("benchmarks", "papers", "examples"):
        for path in sorted((ROOT / folder).glob("*.py")):
            assert "sys.path" not in path.read_text(), path.relative_to(ROOT)
