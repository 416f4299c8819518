"""benchmarks.unified_diff: the peers' patches applied exactly, once."""

import pytest

from benchmarks import unified_diff
from benchmarks.peer_opennmt import COPY_PATCH

ORIGINAL = "one\ntwo\nthree\nfour\nfive\nsix\n"
# Two hunks: "two" changed, and "-- five" (a removed line that looks like a
# file header) for "five" after a line is added.
DIFF = """--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
@@ -4,3 +4,4 @@
 four
+four and a half
-five
+-- five
 six
"""
PATCHED = "one\nTWO\nthree\nfour\nfour and a half\n-- five\nsix\n"


def _tree(tmp_path, text=ORIGINAL):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(text)
    return tmp_path


def test_parse_reads_each_hunk_by_its_line_counts():
    [(path, hunks)] = unified_diff.parse(DIFF)
    assert path == "pkg/mod.py"
    assert hunks == [
        (1, ["one", "two", "three"], ["one", "TWO", "three"]),
        (4, ["four", "five", "six"], ["four", "four and a half", "-- five", "six"]),
    ]


def test_apply_patches_and_is_applied_tells_it(tmp_path):
    root = _tree(tmp_path)
    assert not unified_diff.is_applied(root, DIFF)
    unified_diff.apply(root, DIFF)
    assert (root / "pkg" / "mod.py").read_text() == PATCHED
    assert unified_diff.is_applied(root, DIFF)


def test_a_diff_of_another_version_writes_nothing(tmp_path):
    other = ORIGINAL.replace("five", "5")
    root = _tree(tmp_path, other)
    with pytest.raises(ValueError, match="does not apply to pkg/mod.py"):
        unified_diff.apply(root, DIFF)
    assert (root / "pkg" / "mod.py").read_text() == other


def test_the_opennmt_patch_touches_the_three_bugs_files():
    files = dict(unified_diff.parse(COPY_PATCH.read_text()))
    assert sorted(files) == [
        "onmt/decoders/decoder.py",
        "onmt/modules/copy_generator.py",
        "onmt/translate/translator.py",
        "onmt/utils/loss.py",
    ]
    added = [line for hunks in files.values() for _, _, new in hunks for line in new]
    assert "                batch_offset=batch_offset," in added
    assert any("torch.stack(attns[k], dim=1)" in line for line in added)
