"""Dot-product scores: Luong's "dot" (optionally learned-scaled) and scaled dot."""

import math

import keras
from keras import ops

from keras_attn.layers.base import BaseAttention


def _check_same_dims(layer, query_dim, key_dim):
    if query_dim != key_dim:
        raise ValueError(
            f"{layer.__class__.__name__} needs query and key of the same last "
            f"dimension. Received query_dim={query_dim}, key_dim={key_dim}. "
            "Use GeneralAttention (q^T W k) for different dimensions."
        )


def _dot_scores(query, keys):
    return ops.matmul(query, ops.transpose(keys, (0, 2, 1)))


@keras.saving.register_keras_serializable(package="keras_attn")
class DotAttention(BaseAttention):
    """Luong's "dot" score: `score(q, k) = g * q . k`.

    Same math as `keras.layers.Attention(score_mode="dot")`.

    Args:
        use_scale: If True, `g` is a learned scalar initialised to 1 (Luong's
            "scale"); otherwise `g = 1`.
        **kwargs: `BaseAttention` arguments (`dropout`, `seed`, ...).

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn import DotAttention
        >>> query = np.zeros((1, 1, 2), "float32")  # equal scores: the mean value
        >>> value = np.arange(10, dtype="float32").reshape(1, 5, 2)
        >>> context = DotAttention()([query, value])
        >>> ops.convert_to_numpy(context).round(4).tolist()
        [[[4.0, 5.0]]]
    """

    def __init__(self, use_scale=False, **kwargs):
        super().__init__(**kwargs)
        self.use_scale = use_scale

    def _build_scores(self, query_dim, key_dim):
        _check_same_dims(self, query_dim, key_dim)
        self.scale = None
        if self.use_scale:
            self.scale = self.add_weight(name="scale", shape=(), initializer="ones")

    def _calculate_scores(self, query, keys):
        scores = _dot_scores(query, keys)
        if self.scale is not None:
            scores = scores * ops.cast(self.scale, scores.dtype)
        return scores

    def get_config(self):
        return {**super().get_config(), "use_scale": self.use_scale}


@keras.saving.register_keras_serializable(package="keras_attn")
class ScaledDotAttention(BaseAttention):
    """Scaled dot score (Vaswani et al.): `score(q, k) = q . k / sqrt(d)`.

    Args:
        dropout: Fraction of the attention weights to drop in training.
        seed: Seed of the dropout.
        **kwargs: Base `Layer` arguments (`name`, `dtype`, ...).

    Examples:
        >>> import numpy as np
        >>> from keras_attn import ScaledDotAttention
        >>> rng = np.random.default_rng(0)
        >>> query = rng.random((2, 3, 4), dtype="float32")
        >>> value = rng.random((2, 5, 4), dtype="float32")
        >>> context, weights = ScaledDotAttention()(
        ...     [query, value], return_attention_scores=True)
        >>> tuple(context.shape), tuple(weights.shape)
        ((2, 3, 4), (2, 3, 5))
    """

    def _build_scores(self, query_dim, key_dim):
        _check_same_dims(self, query_dim, key_dim)
        self._inv_sqrt_dim = 1.0 / math.sqrt(key_dim)

    def _project_query(self, query):
        # Scaling the query (Tq x d) is cheaper than scaling the scores (Tq x Tv).
        return query * ops.cast(self._inv_sqrt_dim, query.dtype)

    def _calculate_scores(self, query, keys):
        return _dot_scores(query, keys)
