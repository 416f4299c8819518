"""Shared test setup: quiet TensorFlow, backend selection, dtype policy reset.

The backend comes from the `KERAS_BACKEND` environment variable. Tests that
need TensorFlow itself (everything under `models/`) are marked `tf_only`; on
another backend they are deselected, not skipped, so every backend's run
reports only tests that really ran.
"""

import functools
import os
import random
import re

# Before anything imports TensorFlow (Keras may, whatever the backend).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# On JAX every search compiles its loop: XLA's optimizing passes were 75 s of
# the JAX run's 268 (2 cores). The tests check results, not speed; the
# benchmarks and users run with every optimization.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import keras_attn as ka  # noqa: E402

BACKEND = keras.backend.backend()


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "tf_only: needs the TensorFlow backend; deselected on other backends",
    )
    config.addinivalue_line(
        "markers",
        "jax_only: needs the JAX backend (`jax.jit`); deselected on other backends",
    )
    config.addinivalue_line(
        "markers",
        "specs(*ids): run a test taking `spec` on these score layers only",
    )
    config.addinivalue_line(
        "markers",
        "source_tree: reads the checkout's source files; CI's run against the "
        "installed wheel (no keras_attn/ beside the tests) deselects it",
    )


_ONLY = {"tf_only": "tensorflow", "jax_only": "jax"}


# Fixtures that train a model in a subprocess: a test using one (directly or
# through another fixture) must be marked `slow`, so `-m "not slow"` never
# trains.
TRAINING_FIXTURES = ("trained",)


def pytest_collection_modifyitems(config, items):
    unmarked = [
        item.nodeid
        for item in items
        if set(TRAINING_FIXTURES) & set(getattr(item, "fixturenames", ()))
        and item.get_closest_marker("slow") is None
    ]
    if unmarked:
        raise pytest.UsageError(
            "Tests that use a training fixture "
            f"({', '.join(TRAINING_FIXTURES)}) must be marked `slow`. "
            f"Received unmarked: {', '.join(unmarked)}"
        )
    selected, deselected = [], []
    for item in items:
        wrong = any(
            item.get_closest_marker(marker) and backend != BACKEND
            for marker, backend in _ONLY.items()
        )
        (deselected if wrong else selected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected


def pytest_ignore_collect(collection_path, config):
    """On JAX and torch, whole `tf_only` modules are not even imported.

    They import TensorFlow and the summarizer at module level; collecting them
    only to deselect every test would load TensorFlow into a JAX or torch run
    (seconds, and a dependency the library does not have).
    """
    if BACKEND == "tensorflow" or collection_path.suffix != ".py":
        return None
    if not collection_path.name.startswith("test_"):
        return None
    source = collection_path.read_text(encoding="utf-8")
    return True if _MODULE_TF_ONLY.search(source) else None


_MODULE_TF_ONLY = re.compile(r"^pytestmark = .*\btf_only\b", re.MULTILINE)


# pytest-xdist's `loadfile` hands out the files with the most tests first,
# which leaves these few-test end-to-end files (a minute each on TensorFlow,
# the forecast's on JAX) for the end, one worker running them while the
# other idles. Started first, they run beside the many small files.
HEAVIEST_FILES = (
    "tests/test_pipeline.py",  # builds the shared trained run
    "tests/test_multi_worker.py",  # needs no shared run: runs while it trains
    "tests/test_training_faults.py",
    "tests/test_export_faults.py",
    "tests/test_server_faults.py",
    "tests/test_flags.py",
    "tests/test_own_data.py",
    "tests/test_distill.py",  # a train.py run among quick tests
    "tests/test_decoding_levers.py",  # XLA compilations
    "tests/test_forecast.py",
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class HeaviestFilesFirst(LoadFileScheduling):
        def _assign_work_unit(self, node):
            for scope in reversed(HEAVIEST_FILES):
                if scope in self.workqueue:
                    self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return HeaviestFilesFirst(config, log)


def pytest_report_header(config):
    # Where keras_attn comes from: CI's wheel run checks it is site-packages.
    return f"keras {keras.__version__}, backend: {BACKEND}, keras_attn: {ka.__file__}"


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
    For `tf_only` tests: it trains with TensorFlow in a subprocess. Under
    pytest-xdist the workers share one run: the first to need it trains
    while holding a lock, the others wait and read what it wrote.
    """
    from e2e import train_tiny_run

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        tmp_path = tmp_path_factory.mktemp("e2e")
        return tmp_path, train_tiny_run(tmp_path)
    import fcntl
    import json
    import subprocess

    shared = tmp_path_factory.getbasetemp().parent  # one per test session
    folder, saved = shared / "e2e-trained", shared / "e2e-trained.json"
    with open(shared / "e2e-trained.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not saved.exists():
            folder.mkdir()
            result = train_tiny_run(folder)
            fields = ("args", "returncode", "stdout", "stderr")
            saved.write_text(json.dumps({f: getattr(result, f) for f in fields}))
    return folder, subprocess.CompletedProcess(**json.loads(saved.read_text()))


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def gradient():
    """`gradient(fn, *arrays) -> [numpy grads]` of a scalar `fn(*tensors)`.

    Differentiates through the backend's own autodiff (`tf.GradientTape`,
    `jax.grad`, `torch.autograd`), with respect to every argument. JAX's is
    jitted: one compilation costs less than compiling every op eagerly.
    """
    return backend_gradient


def backend_gradient(fn, *arrays):
    if BACKEND == "tensorflow":
        import tensorflow as tf

        xs = [tf.constant(a) for a in arrays]
        with tf.GradientTape() as tape:
            for x in xs:
                tape.watch(x)
            y = fn(*xs)
        return [np.asarray(g) for g in tape.gradient(y, xs)]
    if BACKEND == "jax":
        import jax

        grads = jax.jit(jax.grad(fn, argnums=tuple(range(len(arrays)))))(*arrays)
        return [np.asarray(g) for g in grads]
    if BACKEND == "torch":
        import torch

        xs = [torch.tensor(a, requires_grad=True) for a in arrays]
        fn(*xs).backward()
        return [x.grad.detach().cpu().numpy() for x in xs]
    raise NotImplementedError(f"No gradient helper for backend {BACKEND!r}")


@pytest.fixture
def compiled():
    """`compiled(fn, **kwargs)`: `fn` with `kwargs` bound, under `jax.jit` or
    `tf.function` (on torch as it is). On JAX one compilation costs less than
    compiling each op eagerly."""
    return compile_function


def compile_function(fn, **kwargs):
    fn = functools.partial(fn, **kwargs)
    if BACKEND == "jax":
        import jax

        return jax.jit(fn)
    if BACKEND == "tensorflow":
        import tensorflow as tf

        return tf.function(fn)
    return fn


@pytest.fixture
def precise_dtype():
    """The most precise float dtype Keras computes in on this backend.

    Keras promotes float64 to float32 in `keras.ops` (`matmul`, say) on
    every backend but TensorFlow, so elsewhere tests fall back to float32.
    """
    return "float64" if BACKEND == "tensorflow" else "float32"


# ------------------------------------------------------------------ layer specs
# Every score layer, with a numpy reference of its score written from the
# formula. Tests that take a `spec` argument run once per layer.


def _np(x):
    return np.asarray(keras.ops.convert_to_numpy(x), dtype=np.float64)


def _additive(q_proj, k_proj, v, bias=None):
    hidden = q_proj[:, :, None, :] + k_proj[:, None, :, :]
    if bias is not None:
        hidden = hidden + bias
    return np.tanh(hidden) @ v


def _score_vector(layer):
    v = _np(layer.score_vector)
    if layer.normalize:
        v = _np(layer.score_gain) * v / np.linalg.norm(v)
    return v


def _ref_dot(layer, q, k):
    scores = q @ np.swapaxes(k, 1, 2)
    return scores * _np(layer.scale) if layer.use_scale else scores


def _ref_scaled_dot(layer, q, k):
    return q @ np.swapaxes(k, 1, 2) / np.sqrt(k.shape[-1])


def _ref_general(layer, q, k):
    scores = q @ _np(layer.kernel) @ np.swapaxes(k, 1, 2)
    return scores * _np(layer.scale) if layer.use_scale else scores


def _ref_bahdanau(layer, q, k):
    bias = _np(layer.bias) if layer.use_bias else None
    return _additive(
        q @ _np(layer.query_kernel),
        k @ _np(layer.key_kernel),
        _score_vector(layer),
        bias,
    )


def _ref_concat(layer, q, k):
    # W [q; k] written literally, as one matrix on the concatenation.
    kernel = _np(layer.kernel)
    tq, tv = q.shape[1], k.shape[1]
    pairs = np.concatenate(
        [
            np.repeat(q[:, :, None, :], tv, axis=2),
            np.repeat(k[:, None, :, :], tq, axis=1),
        ],
        axis=-1,
    )
    return np.tanh(pairs @ kernel) @ _score_vector(layer)


def _ref_network(layer, q, k):
    net = layer.network
    w1, b1 = (_np(w) for w in net.get_layer("score_hidden").weights)
    w2, b2 = (_np(w) for w in net.get_layer("score_out").weights)
    tq, tv = q.shape[1], k.shape[1]
    pairs = np.concatenate(
        [
            np.repeat(q[:, :, None, :], tv, axis=2),
            np.repeat(k[:, None, :, :], tq, axis=1),
        ],
        axis=-1,
    )
    return (np.tanh(pairs @ w1 + b1) @ w2 + b2)[..., 0]


def _ref_coverage_attention(layer, q, k, v, value_mask, query_mask):
    """`(context, weights)` of `CoverageAttention`, one query step at a time.

    Step t's scores add `w_c c^t_i` inside the tanh, where the coverage
    `c^t` sums the weights of the earlier unmasked query steps.
    """
    bias = _np(layer.bias) if layer.use_bias else None
    keys = k @ _np(layer.key_kernel)
    w_c = _np(layer.coverage_kernel)
    coverage = np.zeros(keys.shape[:2])
    steps = []
    for t in range(q.shape[1]):
        scores = _additive(
            q[:, t : t + 1] @ _np(layer.query_kernel),
            keys + coverage[..., None] * w_c,
            _score_vector(layer),
            bias,
        )
        weights = np_masked_softmax(scores, value_mask)[:, 0] * query_mask[:, t, None]
        coverage = coverage + weights
        steps.append(weights)
    weights = np.stack(steps, 1)
    return weights @ v, weights


def score_network(query_dim, key_dim, units=8, dtype=None):
    """A small `f(q, k)`: Dense(tanh) on `[q; k]`, then Dense(1)."""
    q = keras.Input((None, None, query_dim), dtype=dtype)
    k = keras.Input((None, None, key_dim), dtype=dtype)
    hidden = keras.layers.Dense(
        units, activation="tanh", name="score_hidden", dtype=dtype
    )(keras.layers.Concatenate(dtype=dtype)([q, k]))
    out = keras.layers.Dense(1, name="score_out", dtype=dtype)(hidden)
    return keras.Model([q, k], out)


class Spec:
    """How to make one score layer, and its numpy reference score.

    Attributes:
        id: Test id.
        make: `make(query_dim, key_dim, **kwargs) -> layer`.
        reference: `reference(layer, query, keys) -> scores (B, Tq, Tv)`.
        same_dims: Whether query and key must have the same last dimension.
        attention: For a layer whose query steps depend on each other
            (coverage), the whole reference instead of `reference`:
            `attention(layer, query, keys, value, value_mask, query_mask) ->
            (context, weights)`, masks as `(B, 1, Tv)` and `(B, Tq)` bools.
    """

    def __init__(self, id, make, reference=None, same_dims=False, attention=None):
        self.id = id
        self.make = make
        self.reference = reference
        self.same_dims = same_dims
        self.attention = attention

    def __repr__(self):
        return self.id


def _specs():
    return [
        Spec(
            "dot",
            lambda dq, dk, **kw: ka.DotAttention(**kw),
            _ref_dot,
            same_dims=True,
        ),
        Spec(
            "dot_scale",
            lambda dq, dk, **kw: ka.DotAttention(use_scale=True, **kw),
            _ref_dot,
            same_dims=True,
        ),
        Spec(
            "scaled_dot",
            lambda dq, dk, **kw: ka.ScaledDotAttention(**kw),
            _ref_scaled_dot,
            same_dims=True,
        ),
        Spec(
            "general",
            lambda dq, dk, **kw: ka.GeneralAttention(**kw),
            _ref_general,
        ),
        Spec(
            "general_scale",
            lambda dq, dk, **kw: ka.GeneralAttention(use_scale=True, **kw),
            _ref_general,
        ),
        Spec(
            "concat",
            lambda dq, dk, **kw: ka.ConcatAttention(units=5, **kw),
            _ref_concat,
        ),
        Spec(
            "bahdanau",
            lambda dq, dk, **kw: ka.BahdanauAttention(units=5, **kw),
            _ref_bahdanau,
        ),
        Spec(
            "bahdanau_normalize",
            lambda dq, dk, **kw: ka.BahdanauAttention(units=5, normalize=True, **kw),
            _ref_bahdanau,
        ),
        Spec(
            "network",
            lambda dq, dk, **kw: ka.NetworkAttention(
                score_network(dq, dk, dtype=kw.get("dtype")), **kw
            ),
            _ref_network,
        ),
        Spec(
            "coverage",
            lambda dq, dk, **kw: ka.CoverageAttention(units=5, **kw),
            attention=_ref_coverage_attention,
        ),
        Spec(
            "coverage_normalize",
            lambda dq, dk, **kw: ka.CoverageAttention(units=5, normalize=True, **kw),
            attention=_ref_coverage_attention,
        ),
    ]


SPECS = _specs()


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


def np_masked_softmax(scores, mask=None):
    """float64 softmax over the last axis; zero where masked and on full rows."""
    scores = np.asarray(scores, dtype=np.float64)
    if mask is None:
        mask = np.ones(scores.shape, bool)
    mask = np.broadcast_to(mask, scores.shape)
    shifted = np.where(mask, scores, -np.inf)
    row_max = np.max(shifted, axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    e = np.where(mask, np.exp(shifted - row_max), 0.0)
    total = e.sum(-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def np_attention(spec, layer, query, value, key=None, value_mask=None, query_mask=None):
    """Reference `(context, weights)` for a rank-3 query, in float64.

    Masked query steps get zero weights and context.
    """
    query, value = np.asarray(query, np.float64), np.asarray(value, np.float64)
    key = value if key is None else np.asarray(key, np.float64)
    if value_mask is None:
        value_mask = np.ones((value.shape[0], value.shape[1]), bool)
    mask = np.asarray(value_mask, bool)[:, None, :]
    if query_mask is None:
        query_mask = np.ones(query.shape[:2], bool)
    query_mask = np.asarray(query_mask, bool)
    if spec.attention is not None:
        return spec.attention(layer, query, key, value, mask, query_mask)
    weights = np_masked_softmax(spec.reference(layer, query, key), mask)
    weights = weights * query_mask[..., None]
    return weights @ value, weights


def randomize_weights(layer, rng):
    """Non-default weights, so a scale, gain or bias that is ignored shows."""
    for var in layer.weights:
        shape = tuple(var.shape)
        if shape == ():
            value = rng.uniform(0.5, 1.5)
        else:
            value = rng.normal(scale=0.5, size=shape)
        var.assign(np.asarray(value, dtype=var.dtype))


@pytest.fixture
def ref():
    """Namespace of the numpy references and helpers above."""

    class Ref:
        attention = staticmethod(np_attention)
        masked_softmax = staticmethod(np_masked_softmax)
        randomize_weights = staticmethod(randomize_weights)
        score_network = staticmethod(score_network)
        specs = SPECS

    return Ref
