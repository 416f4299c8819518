"""Fixtures and hooks: quiet TensorFlow, backend selection, dtype policy reset.

The backend comes from the `KERAS_BACKEND` environment variable. The marks
and what the hooks do with them are in markers.py, the score layers' numpy
references in reference_math.py, the shared trained run in trained_run.py,
and the order pytest-xdist hands out the files in xdist_scheduling.py.
"""

import os
import random

# Before anything imports TensorFlow (Keras may, whatever the backend).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# On JAX every search compiles its loop, and XLA's optimizing passes are a
# large share of the JAX run. The tests check results, not speed; the
# benchmarks and users run with every optimization.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from backend_transforms import backend_gradient, compile_function  # noqa: E402
from markers import (  # noqa: E402
    MARKERS,
    TRAINING_FIXTURES,
    is_tf_only_module,
    needs_other_backend,
    trains_unmarked,
)
from reference_math import (  # noqa: E402
    SPECS,
    np_attention,
    np_masked_softmax,
    randomize_weights,
    score_network,
)
from trained_run import shared_trained_run  # noqa: E402

import keras_attn as ka  # noqa: E402

BACKEND = keras.backend.backend()


def pytest_configure(config):
    for line in MARKERS:
        config.addinivalue_line("markers", line)


def pytest_collection_modifyitems(config, items):
    unmarked = [item.nodeid for item in items if trains_unmarked(item)]
    if unmarked:
        raise pytest.UsageError(
            "Tests that use a training fixture "
            f"({', '.join(TRAINING_FIXTURES)}) must be marked `slow`. "
            f"Received unmarked: {', '.join(unmarked)}"
        )
    selected, deselected = [], []
    for item in items:
        (deselected if needs_other_backend(item, BACKEND) else selected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected


def pytest_ignore_collect(collection_path, config):
    """On JAX and torch, whole `tf_only` modules are not even imported.

    They import TensorFlow and the summarizer at module level; collecting them
    only to deselect every test would load TensorFlow into a JAX or torch run
    (seconds, and a dependency the library does not have).
    """
    if BACKEND == "tensorflow":
        return None
    return True if is_tf_only_module(collection_path) else None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None
    from xdist_scheduling import HeaviestFilesFirst

    return HeaviestFilesFirst(config, log)


def pytest_report_header(config):
    # Where keras_attn comes from: CI's wheel run checks it is site-packages.
    return f"keras {keras.__version__}, backend: {BACKEND}, keras_attn: {ka.__file__}"


def pytest_generate_tests(metafunc):
    if "spec" not in metafunc.fixturenames:
        return
    specs = SPECS
    marker = metafunc.definition.get_closest_marker("specs")
    if marker is not None:
        unknown = set(marker.args) - {s.id for s in SPECS}
        if unknown:
            raise ValueError(f"Unknown spec ids in @pytest.mark.specs: {unknown}")
        specs = [s for s in SPECS if s.id in marker.args]
    metafunc.parametrize("spec", specs, ids=[s.id for s in specs])


@pytest.fixture(autouse=True)
def reset_dtype_policy():
    """Every test starts and ends under the float32 policy."""
    keras.config.set_dtype_policy("float32")
    yield
    keras.config.set_dtype_policy("float32")


@pytest.fixture(autouse=True)
def _seed():
    # Initializers without a seed draw from Python's `random`. Not
    # `keras.utils.set_random_seed`: it imports TensorFlow on every backend.
    random.seed(1234)
    np.random.seed(1234)
    if BACKEND == "torch":
        import torch

        torch.manual_seed(1234)


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """`(folder, result)` of one tiny `train.py` run, shared by every module.

    The run is in `folder / "run"` and its export in `folder / "export" / "1"`.
    For `tf_only` tests: it trains with TensorFlow in a subprocess, once per
    session (trained_run.py).
    """
    return shared_trained_run(tmp_path_factory)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def gradient():
    """`gradient(fn, *arrays) -> [numpy grads]` of a scalar `fn(*tensors)`.

    Differentiates through the backend's own autodiff (backend_transforms.py).
    """
    return backend_gradient


@pytest.fixture
def compiled():
    """`compiled(fn, **kwargs)`: `fn` with `kwargs` bound, under `jax.jit` or
    `tf.function` (on torch as it is). On JAX one compilation costs less than
    compiling each op eagerly."""
    return compile_function


@pytest.fixture
def precise_dtype():
    """The most precise float dtype Keras computes in on this backend.

    Keras promotes float64 to float32 in `keras.ops` (`matmul`, say) on
    every backend but TensorFlow, so elsewhere tests fall back to float32.
    """
    return "float64" if BACKEND == "tensorflow" else "float32"


@pytest.fixture
def ref():
    """Namespace of the numpy references and helpers of reference_math.py."""

    class Ref:
        attention = staticmethod(np_attention)
        masked_softmax = staticmethod(np_masked_softmax)
        randomize_weights = staticmethod(randomize_weights)
        score_network = staticmethod(score_network)
        specs = SPECS

    return Ref
