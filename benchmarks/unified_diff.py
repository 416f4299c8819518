"""Applies a unified diff (`diff -u`, `git diff`) to a folder, exactly.

The peers' patches (`benchmarks/peer_patches/*.diff`) are applied to the
installed package with this rather than `patch(1)`, which not every machine
has. No fuzz: every hunk's context and removed lines must be where the hunk
says, or nothing is written. A file the diff has already been applied to
is told apart (`is_applied`), so that installing twice patches once.
"""

import re
from pathlib import Path

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def parse(diff_text):
    """`[(path, [(old_start, old_lines, new_lines), ...]), ...]`: a file's
    path (after `+++ b/`) and its hunks, lines without their newlines. A
    hunk ends after the line counts its header gives."""
    files, hunks, left = [], None, [0, 0]
    for line in diff_text.splitlines():
        if left[0] or left[1]:
            _, old, new = hunks[-1]
            kind, text = line[:1] or " ", line[1:]
            if kind != "+":
                old.append(text)
                left[0] -= 1
            if kind != "-":
                new.append(text)
                left[1] -= 1
        elif line.startswith("+++ "):
            path = line[4:].split("\t")[0]
            hunks = []
            files.append((path[2:] if path.startswith("b/") else path, hunks))
        elif (found := HUNK.match(line)) and hunks is not None:
            hunks.append((int(found.group(1)), [], []))
            left = [int(found.group(2) or 1), int(found.group(4) or 1)]
    return files


def _replace(lines, hunks, side):
    """`lines` with each hunk's `side` (1: old, 2: new) lines swapped for the
    other side, or None where a hunk's lines are not found where it says."""
    other = 3 - side
    out, at, shift = [], 0, 0
    for hunk in hunks:
        start = hunk[0] - 1 + (shift if side == 2 else 0)
        start = max(start, 0)
        want = hunk[side]
        if lines[start : start + len(want)] != want:
            return None
        out += lines[at:start] + hunk[other]
        at = start + len(want)
        shift += len(hunk[2]) - len(hunk[1])
    return out + lines[at:]


def _read(root, path):
    return (Path(root) / path).read_text().split("\n")


def is_applied(root, diff_text):
    """Whether every file of the diff under `root` is in its patched state."""
    return all(
        _replace(_read(root, path), hunks, 2) is not None
        for path, hunks in parse(diff_text)
    )


def apply(root, diff_text):
    """Patches the files under `root`; raises ValueError, writing nothing,
    if a hunk does not match."""
    patched = {}
    for path, hunks in parse(diff_text):
        new = _replace(_read(root, path), hunks, 1)
        if new is None:
            raise ValueError(
                f"The diff does not apply to {path} under {root}: a hunk's "
                "lines differ. Received: a file of another version."
            )
        patched[path] = "\n".join(new)
    for path, text in patched.items():
        (Path(root) / path).write_text(text)
