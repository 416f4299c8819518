"""`train.py --backend jax` runs for the tests: the tiny run's flags, the
JAX training process (which reports whether TensorFlow was ever imported
into it), and checks of the run folders it leaves.

The JAX process runs the Python in `KERAS_ATTN_JAX_PYTHON` (.ci/run sets it
to its venv without TensorFlow), or this one where it has JAX; with neither
a test fails, never skips.
"""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from e2e import ROOT, train_command

# Three validations of 8 batches of 8; the export's greedy search is the
# validation's (`SearchOptions()`: at most 20 tokens, nothing tuned).
FLAGS = (
    "--validate-every",
    "64",
    "--train-examples",
    "192",
    "--min-train-examples",
    "192",
    "--learning-rate",
    "0.01",
    "--max-length",
    "20",
    "--min-length",
    "0",
    "--max-eval-examples",
    "8",
    # `general` keeps the digits of the data's words (`w12`): `gigaword`
    # makes them `#`, and every headline scored 0, which the hand-off test
    # below would match whatever the export decoded.
    "--normalization",
    "general",
    "--backend",
    "jax",
)


# Runs train.py as `python train.py`, then says whether TensorFlow was ever
# imported into the process.
WRAPPER = """
import runpy, sys
sys.argv = ["train.py", *sys.argv[1:]]
try:
    runpy.run_path({train!r}, run_name="__main__")
    code = 0
except SystemExit as exit:
    code = exit.code
print("tensorflow imported:", "tensorflow" in sys.modules, file=sys.stderr)
sys.exit(code)
"""


def jax_python():
    given = os.environ.get("KERAS_ATTN_JAX_PYTHON")
    if given:
        return given
    if importlib.util.find_spec("jax") is not None:
        return sys.executable
    pytest.fail(
        "train.py --backend jax needs a Python with JAX: set "
        "KERAS_ATTN_JAX_PYTHON to one (.ci/run sets it to its venv without "
        "TensorFlow)"
    )


def jax_process(tmp_path, run_dir, **popen):
    """The JAX training process on `run_dir` (started, not waited for)."""
    wrapper = tmp_path / "jax_train.py"
    wrapper.write_text(WRAPPER.format(train=str(ROOT / "train.py")))
    command = train_command(tmp_path, *FLAGS)
    command[command.index("--run-dir") + 1] = str(run_dir)
    env = {
        **os.environ,
        "KERAS_BACKEND": "jax",
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "JAX_DISABLE_MOST_OPTIMIZATIONS": "1",
        # The checkout's packages, as `python train.py` from it finds them.
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p
        ),
    }
    return subprocess.Popen(
        [jax_python(), str(wrapper), *command[2:]],
        cwd=ROOT,
        env=env,
        text=True,
        **popen,
    )


def finished(process):
    out, _ = process.communicate(timeout=600)
    assert process.returncode == 0, out[-3000:]
    return out


def backed_up_validations(metadata):
    try:
        return json.loads(metadata.read_text())["epoch"] >= 1
    except (OSError, ValueError, KeyError):
        return False


def assert_same_weights(run_dir, other_dir):
    """The best weights, and the last backup (raw weights and the
    optimizer), of two run folders are equal."""
    import h5py

    for name in ("best.weights.h5", "backup/latest.weights.h5"):
        with (
            h5py.File(run_dir / name) as whole,
            h5py.File(other_dir / name) as cut,
        ):
            arrays = datasets(whole)
            assert len(arrays) > 10, arrays
            for array in arrays:
                np.testing.assert_array_equal(whole[array][()], cut[array][()])


def datasets(h5):
    import h5py

    names = []
    h5.visititems(
        lambda name, item: (
            names.append(name) if isinstance(item, h5py.Dataset) else None
        )
    )
    return names
