"""Additive scores: Bahdanau's `v^T tanh(W1 k + W2 q + b)` and Luong's "concat"."""

import keras
from keras import ops

from keras_attn.layers.base import BaseAttention
from keras_attn.layers.masking import as_dtype


def additive_scores(query, keys, v, bias=None, extra=None):
    """`sum(v * tanh(q_i + k_j [+ extra_j] + b))` for every query/key pair.

    Args:
        query: Projected query, `(batch, Tq, units)`.
        keys: Projected keys, `(batch, Tv, units)`.
        v: `(units,)`.
        bias: Optional `(units,)`.
        extra: Optional key-side term `(batch, Tq or 1, Tv, units)` (coverage).

    Returns:
        `(batch, Tq, Tv)`.
    """
    # The bias joins the (batch, Tq, units) query, not the 4-D sum.
    if bias is not None:
        query = query + bias
    hidden = ops.expand_dims(query, 2) + ops.expand_dims(keys, 1)
    if extra is not None:
        hidden = hidden + extra
    if keras.backend.backend() == "jax":
        # XLA fuses tanh and the sum over units into one pass over the 4-D
        # tensor; a contraction would write tanh(hidden) out first.
        return ops.sum(ops.tanh(hidden) * v, axis=-1)
    if keras.backend.backend() == "torch":
        # A matrix-vector product: torch's einsum, the same one kernel, first
        # parses its equation and plans the contraction at every call.
        return ops.matmul(ops.tanh(hidden), v)
    # TensorFlow runs kernel by kernel: einsum's contraction is one kernel
    # where the elementwise product and the sum are two passes.
    return ops.einsum("bqku,u->bqk", ops.tanh(hidden), v)


@keras.saving.register_keras_serializable(package="keras_attn")
class BahdanauAttention(BaseAttention):
    """Additive attention (Bahdanau et al. 2015).

    `score(q, k) = v^T tanh(W1 k + W2 q + b)`. With `normalize=True`, `v` is
    weight-normalised: `v = g * v / ||v||` (Salimans & Kingma 2016), as in
    TensorFlow Addons' `BahdanauAttention(normalize=True)`.

    `W1 k` depends on the keys alone: `prepare_memory` computes it once per
    source sequence, and `step` only projects the query.

    Args:
        units: Size of the hidden layer of the score.
        normalize: Weight-normalise `v`.
        use_bias: Whether the score has the bias `b`.
        kernel_initializer: Initializer of `W1`, `W2` and `v`.
        **kwargs: `BaseAttention` arguments.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn import BahdanauAttention
        >>> rng = np.random.default_rng(0)
        >>> decoder_states = rng.random((2, 3, 8), dtype="float32")
        >>> encoder_outputs = rng.random((2, 5, 16), dtype="float32")
        >>> layer = BahdanauAttention(units=32)
        >>> context, weights = layer(
        ...     [decoder_states, encoder_outputs], return_attention_scores=True)
        >>> tuple(context.shape), tuple(weights.shape)
        ((2, 3, 16), (2, 3, 5))
        >>> ops.convert_to_numpy(ops.sum(weights, axis=-1)).round(5).tolist()
        [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    """

    def __init__(
        self,
        units,
        normalize=False,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(units, int) or units <= 0:
            raise ValueError(
                f"`units` must be a positive integer. Received: units={units}"
            )
        self.units = units
        self.normalize = normalize
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def _build_scores(self, query_dim, key_dim):
        self.key_kernel = self.add_weight(
            name="key_kernel",
            shape=(key_dim, self.units),
            initializer=self.kernel_initializer,
        )
        self.query_kernel = self.add_weight(
            name="query_kernel",
            shape=(query_dim, self.units),
            initializer=self.kernel_initializer,
        )
        self._build_score_vector()

    def _build_score_vector(self):
        self.score_vector = self.add_weight(
            name="score_vector",
            shape=(self.units,),
            initializer=self.kernel_initializer,
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias", shape=(self.units,), initializer="zeros"
            )
        self.score_gain = None
        if self.normalize:
            self.score_gain = self.add_weight(
                name="score_gain",
                shape=(),
                initializer=keras.initializers.Constant((1.0 / self.units) ** 0.5),
            )

    def _project_keys(self, key):
        return ops.matmul(key, as_dtype(self.key_kernel, key.dtype))

    def _project_query(self, query):
        return ops.matmul(query, as_dtype(self.query_kernel, query.dtype))

    def _score_vector(self, dtype):
        v = self.score_vector
        if self.normalize:
            v = self.score_gain * v * ops.rsqrt(ops.sum(ops.square(v)))
        return as_dtype(v, dtype)

    def _calculate_scores(self, query, keys):
        bias = None if self.bias is None else as_dtype(self.bias, query.dtype)
        return additive_scores(query, keys, self._score_vector(query.dtype), bias)

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "normalize": self.normalize,
            "use_bias": self.use_bias,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }


@keras.saving.register_keras_serializable(package="keras_attn")
class ConcatAttention(BahdanauAttention):
    """Luong's "concat" score: `score(q, k) = v^T tanh(W [q; k])`.

    `W` has shape `(query_dim + key_dim, units)`. Splitting it into its query
    and key rows gives `W [q; k] = W_q q + W_k k`, so the key half is projected
    once per memory, as in `BahdanauAttention` (which adds a bias `b`).

    Args:
        units: Size of the hidden layer of the score.
        normalize: Weight-normalise `v`.
        use_bias: Whether to add a bias `b` inside the `tanh` (Luong's
            score has none).
        kernel_initializer: Initializer of `W` and `v`.
        **kwargs: `BaseAttention` arguments.

    Examples:
        >>> import numpy as np
        >>> from keras_attn import ConcatAttention
        >>> rng = np.random.default_rng(0)
        >>> decoder_states = rng.random((2, 3, 8), dtype="float32")
        >>> encoder_outputs = rng.random((2, 5, 16), dtype="float32")
        >>> context, weights = ConcatAttention(units=32)(
        ...     [decoder_states, encoder_outputs], return_attention_scores=True)
        >>> tuple(context.shape), tuple(weights.shape)
        ((2, 3, 16), (2, 3, 5))
    """

    def __init__(self, units, normalize=False, use_bias=False, **kwargs):
        super().__init__(units, normalize=normalize, use_bias=use_bias, **kwargs)

    def _build_scores(self, query_dim, key_dim):
        self._query_dim = query_dim
        self.kernel = self.add_weight(
            name="kernel",
            shape=(query_dim + key_dim, self.units),
            initializer=self.kernel_initializer,
        )
        self._build_score_vector()

    def _project_keys(self, key):
        w_k = self.kernel[self._query_dim :]
        return ops.matmul(key, as_dtype(w_k, key.dtype))

    def _project_query(self, query):
        w_q = self.kernel[: self._query_dim]
        return ops.matmul(query, as_dtype(w_q, query.dtype))
