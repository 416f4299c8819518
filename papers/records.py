"""The papers' results files: one JSON line per visit of a unit, and its provenance.

A line's `status` is `done` (the recipe's stopping rule was met) or
`partial` (an invocation's cap stopped it); the last line of a unit is its
current state. Every line records the machine (`lscpu` model and matmul flags),
the backend, the command and the git commit that produced it.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path

from models.settings.json_files import write_whole
from models.settings.machine import machine as machine_record

PACKAGE = Path(__file__).resolve().parent
ROOT = PACKAGE.parent
RESULTS = {
    "babi": PACKAGE / "results" / "babi.jsonl",
    "pointer": PACKAGE / "results" / "pointer_networks.jsonl",
}
# Build output, ignored by git: checkpoints, cached references, pictures.
OUTPUT = PACKAGE / "output"
CHECKPOINTS = OUTPUT / "runs"


def machine():
    """The machine (`models.settings.machine`: CPU model and matmul flags,
    cores, memory, Keras' version) and its accelerator."""
    info = {
        **machine_record(libraries=("keras", "tensorflow", "torch", "jax")),
        "accelerator": "none",
    }
    if os.environ.get("KERAS_BACKEND") == "jax":
        import jax

        device = jax.devices()[0]
        if device.platform != "cpu":
            info["accelerator"] = device.device_kind
    return info


def git_commit():
    """`$KERAS_ATTN_COMMIT` if set, else HEAD. A GPU machine's copy of the
    working tree carries a `.git` whose HEAD can be older than the files
    that travelled (uncommitted or later commits), so its runs name theirs."""
    if os.environ.get("KERAS_ATTN_COMMIT"):
        return os.environ["KERAS_ATTN_COMMIT"]
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
        )
    except OSError:
        return "unknown"
    return out.stdout.strip() or "unknown"


def provenance(argv, module="papers.runner"):
    """What every line records: the machine, the backend, the command
    (`python -m module argv...`) and the commit."""
    import keras

    return {
        "machine": machine(),
        "backend": keras.backend.backend(),
        "command": f"python -m {module} " + shlex.join(argv),
        "commit": git_commit(),
    }


def read_results(path):
    """The result lines of `path` (none if it does not exist)."""
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def latest_by_unit(results):
    """`{unit: its last line}`: a unit's later lines supersede its earlier."""
    latest = {}
    for line in results:
        latest[line["unit"]] = line
    return latest


def append_result(path, line):
    """Appends `line` to the results file `path` (created if needed).

    The file is written again whole (`write_whole`), not appended to: a kill
    midway leaves the previous lines, never a torn last one that the next
    `read_results` could not parse.
    """
    path = Path(path)
    previous = path.read_text() if path.exists() else ""
    write_whole(path, previous + json.dumps(line, sort_keys=True) + "\n")


def commit_results(paths, message):
    """Commits the results files alone; a busy index is retried, then skipped."""
    paths = [str(p) for p in paths]
    for _ in range(5):
        add = subprocess.run(["git", "-C", str(ROOT), "add", *paths])
        done = subprocess.run(
            ["git", "-C", str(ROOT), "commit", "-q", "-m", message, "--", *paths]
        )
        if add.returncode == 0 and done.returncode == 0:
            return True
        time.sleep(2)
    return False
