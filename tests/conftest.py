"""Shared test setup: quiet TensorFlow, backend selection, dtype policy reset.

The backend comes from the `KERAS_BACKEND` environment variable. Tests that
need TensorFlow itself (everything under `models/`) are marked `tf_only`; on
another backend they are deselected, not skipped, so every backend's run
reports only tests that really ran.
"""

import os
import random

# Before anything imports TensorFlow (Keras may, whatever the backend).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

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


_ONLY = {"tf_only": "tensorflow", "jax_only": "jax"}


def pytest_collection_modifyitems(config, items):
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


def pytest_report_header(config):
    return f"keras {keras.__version__}, backend: {BACKEND}"


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
    return q @ _np(layer.kernel) @ np.swapaxes(k, 1, 2)


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
    """

    def __init__(self, id, make, reference, same_dims=False):
        self.id = id
        self.make = make
        self.reference = reference
        self.same_dims = same_dims

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


def np_attention(spec, layer, query, value, key=None, value_mask=None):
    """Reference `(context, weights)` for a rank-3 query, in float64."""
    query, value = np.asarray(query, np.float64), np.asarray(value, np.float64)
    key = value if key is None else np.asarray(key, np.float64)
    scores = spec.reference(layer, query, key)
    mask = None if value_mask is None else np.asarray(value_mask, bool)[:, None, :]
    weights = np_masked_softmax(scores, mask)
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
