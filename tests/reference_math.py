"""NumPy references of the score layers, written from their formulas.

`SPECS` lists every score layer with how to make it and its reference score;
tests taking a `spec` argument run once per entry (conftest.py's
`pytest_generate_tests`). The references compute in float64.
"""

import keras
import numpy as np

import keras_attn as ka


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


def coverage_attention(layer, q, k, v, value_mask, query_mask):
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
            attention=coverage_attention,
        ),
        Spec(
            "coverage_normalize",
            lambda dq, dk, **kw: ka.CoverageAttention(units=5, normalize=True, **kw),
            attention=coverage_attention,
        ),
    ]


SPECS = _specs()


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
