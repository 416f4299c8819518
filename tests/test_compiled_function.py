"""`CompiledFunction` on torch: `torch.compile`, and eager where torch
cannot compile."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.torch_only

# A layer's function compiled with no C++ compiler for inductor's CPU
# kernels, and an empty kernel cache (a cached kernel needs no compiler).
SCRIPT = """
import warnings
import keras
import numpy as np
from keras_attn.decoding.compiled import CompiledFunction

dense = keras.layers.Dense(2, kernel_initializer="ones")
dense(np.zeros((1, 3), "float32"))
run = CompiledFunction(dense, lambda options: (lambda x: dense(x) * options["k"]))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    first = run({"k": 2.0}, np.ones((4, 3), "float32"))
    second = run({"k": 2.0}, np.ones((4, 3), "float32"))
    other = run({"k": 3.0}, np.ones((4, 3), "float32"))  # eager at once
ours = [str(w.message) for w in caught if "torch.compile failed" in str(w.message)]
print(len(ours), *(keras.ops.convert_to_numpy(x).tolist()[0]
                   for x in (first, second, other)))
print(ours[0])
"""


def test_without_a_cxx_compiler_the_functions_run_eagerly_with_one_warning(
    tmp_path,
):
    env = dict(
        os.environ,
        KERAS_BACKEND="torch",
        CXX=str(tmp_path / "no-such-compiler"),
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "kernels"),
    )
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout.splitlines()
    assert out[0] == "1 [6.0, 6.0] [6.0, 6.0] [9.0, 9.0]"
    assert out[1].startswith("torch.compile failed, so searches run eagerly: ")
    assert "compiler" in out[1].lower()
