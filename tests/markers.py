"""The suite's own marks, and what conftest.py's hooks do with them.

Tests that need TensorFlow itself (everything under `models/`) are marked
`tf_only`; on another backend they are deselected, not skipped, so every
backend's run reports only tests that really ran.
"""

import re

# Each mark, as `pytest_configure` declares it ("name: description").
MARKERS = (
    "tf_only: needs the TensorFlow backend; deselected on other backends",
    "jax_only: needs the JAX backend (`jax.jit`); deselected on other backends",
    "torch_only: needs the torch backend (autograd, `torch.onnx`); deselected on "
    "other backends",
    "specs(*ids): run a test taking `spec` on these score layers only",
    "source_tree: reads the checkout's source files; CI's run against the "
    "installed wheel (no keras_attn/ beside the tests) deselects it",
)

# The backends each backend mark allows.
BACKEND_MARKS = {
    "tf_only": ("tensorflow",),
    "jax_only": ("jax",),
    "torch_only": ("torch",),
}

# Fixtures that train a model in a subprocess: a test using one (directly or
# through another fixture) must be marked `slow`, so `-m "not slow"` never
# trains.
TRAINING_FIXTURES = ("trained",)

MODULE_TF_ONLY = re.compile(r"^pytestmark = .*\btf_only\b", re.MULTILINE)


def needs_other_backend(item, backend):
    """Whether the test `item` carries a mark for a backend other than `backend`."""
    return any(
        item.get_closest_marker(mark) and backend not in allowed
        for mark, allowed in BACKEND_MARKS.items()
    )


def trains_unmarked(item):
    """Whether the test `item` uses a training fixture without the `slow` mark."""
    uses = set(TRAINING_FIXTURES) & set(getattr(item, "fixturenames", ()))
    return bool(uses) and item.get_closest_marker("slow") is None


def is_tf_only_module(path):
    """Whether the test module at `path` marks all of itself `tf_only`.

    Read as text, not imported: such modules import TensorFlow at module
    level.
    """
    if path.suffix != ".py" or not path.name.startswith("test_"):
        return False
    return bool(MODULE_TF_ONLY.search(path.read_text(encoding="utf-8")))
