"""keras_attn's docstrings and comments point only to sections that exist.

A pointer is a page and a quoted heading, `docs/tfa-migration.md, "Inference
after reload"` or `the README's "Install"`: the page must exist and have a
heading of that text (a number in front of it, `## 2. Decoding`, aside).
"""

import re
from pathlib import Path

import keras_attn

ROOT = Path(__file__).resolve().parents[1]
# The package and its API groups' subpackages (`keras_attn/networks/`, ...).
SOURCES = sorted(Path(keras_attn.__file__).parent.rglob("*.py"))
_POINTER = re.compile(
    r"(README(?:\.md)?|[\w/.-]+\.md)(?:'s|,)\s+\"([^\"]+)\"", re.IGNORECASE
)
_HEADING = re.compile(r"^#+\s+(?:\d+\.\s+)?(.+?)\s*$", re.MULTILINE)


def _pointers():
    found = []
    for source in SOURCES:
        # One line per sentence: a heading quoted across a line break of a
        # docstring or a comment reads as it would unbroken.
        text = re.sub(r"\s*\n\s*#?\s*", " ", source.read_text(encoding="utf-8"))
        for page, heading in _POINTER.findall(text):
            page = "README.md" if page.lower().startswith("readme") else page
            found.append((source.name, page, heading))
    return found


def test_every_pointer_names_a_heading_that_exists():
    pointers = _pointers()
    # The cell wrapper points to the migration guide, the entity network's
    # memory norm to the history: the scan sees them.
    assert {page for _, page, _ in pointers} >= {
        "docs/tfa-migration.md",
        "docs/history.md",
    }
    dangling = []
    for source, page, heading in pointers:
        path = ROOT / page
        headings = (
            _HEADING.findall(path.read_text(encoding="utf-8")) if path.is_file() else []
        )
        if heading not in headings:
            dangling.append(f'{source}: {page}, "{heading}"')
    assert not dangling, f"pointers to no section: {dangling}"
