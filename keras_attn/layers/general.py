"""Luong's "general" (bilinear) score: `score(q, k) = q^T W k`."""

import keras
from keras import ops

from keras_attn.layers.base import BaseAttention


@keras.saving.register_keras_serializable(package="keras_attn")
class GeneralAttention(BaseAttention):
    """Bilinear score `score(q, k) = g * q^T W k`, `W` of shape `(query_dim, key_dim)`.

    The query is projected (`q^T W`), not the keys: one projection per query
    instead of one per key, and the memory needs no preparation at all.
    Query and key dimensions may differ. This is TensorFlow Addons'
    `LuongAttention` (whose `memory_layer` kernel is `W` transposed), and
    with `use_scale=True` its `LuongAttention(scale=True)`.

    Args:
        use_scale: If True, `g` is a learned scalar initialised to 1;
            otherwise `g = 1`.
        kernel_initializer: Initializer of `W`.
        **kwargs: `BaseAttention` arguments.

    Examples:
        >>> import numpy as np
        >>> from keras_attn import GeneralAttention
        >>> rng = np.random.default_rng(0)
        >>> decoder_states = rng.random((2, 3, 8), dtype="float32")
        >>> encoder_outputs = rng.random((2, 5, 16), dtype="float32")
        >>> context = GeneralAttention()([decoder_states, encoder_outputs])
        >>> tuple(context.shape)
        (2, 3, 16)
    """

    def __init__(self, use_scale=False, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.use_scale = use_scale
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def _build_scores(self, query_dim, key_dim):
        self.kernel = self.add_weight(
            name="kernel",
            shape=(query_dim, key_dim),
            initializer=self.kernel_initializer,
        )
        self.scale = None
        if self.use_scale:
            self.scale = self.add_weight(name="scale", shape=(), initializer="ones")

    def _project_query(self, query):
        kernel = self.kernel
        if self.scale is not None:
            # Scaling W (query_dim x key_dim) is cheaper than the scores.
            kernel = kernel * self.scale
        return ops.matmul(query, ops.cast(kernel, query.dtype))

    def _calculate_scores(self, query, keys):
        return ops.matmul(query, ops.transpose(keys, (0, 2, 1)))

    def get_config(self):
        return {
            **super().get_config(),
            "use_scale": self.use_scale,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }
