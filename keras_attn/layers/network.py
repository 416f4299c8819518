"""Attention whose score is any user-supplied network `f(q, k)`."""

import keras
from keras import ops

from keras_attn.arguments import deserialize_layer
from keras_attn.layers.base import BaseAttention


@keras.saving.register_keras_serializable(package="keras_attn")
class NetworkAttention(BaseAttention):
    """Attention with a learned score network: `score(q, k) = f(q, k)`.

    "One may choose f(v_i, u), where f is an arbitrary neural network."
    `network` is called on `[q, k]` broadcast to every query/key pair,
    `(batch, Tq, Tv, query_dim)` and `(batch, Tq, Tv, key_dim)`, and returns
    `(batch, Tq, Tv)` or `(batch, Tq, Tv, 1)`. Memory is `O(Tq * Tv * dim)`:
    meant for short sequences or a single decoder step.

    Args:
        network: A Keras layer or model taking `[q, k]`. Serialized with the
            layer, so a registered or built-in network reloads with it.
        **kwargs: `BaseAttention` arguments.

    Examples:
        >>> import keras
        >>> import numpy as np
        >>> from keras_attn import NetworkAttention
        >>> q_in, k_in = keras.Input((None, None, 8)), keras.Input((None, None, 8))
        >>> h = keras.layers.Dense(16, activation="relu")(
        ...     keras.layers.Concatenate()([q_in, k_in]))
        >>> f = keras.Model([q_in, k_in], keras.layers.Dense(1)(h))
        >>> layer = NetworkAttention(f)
        >>> rng = np.random.default_rng(0)
        >>> query = rng.random((2, 3, 8), dtype="float32")
        >>> value = rng.random((2, 5, 8), dtype="float32")
        >>> tuple(layer([query, value]).shape)
        (2, 3, 8)
    """

    def __init__(self, network, **kwargs):
        super().__init__(**kwargs)
        network = deserialize_layer(network)
        if not callable(network):
            raise ValueError(
                "`network` must be a Keras layer or model computing "
                f"f(q, k). Received: network={network!r}"
            )
        self.network = network

    def _calculate_scores(self, query, keys):
        tq, tv = ops.shape(query)[1], ops.shape(keys)[1]
        q = ops.repeat(ops.expand_dims(query, 2), tv, axis=2)
        k = ops.repeat(ops.expand_dims(keys, 1), tq, axis=1)
        scores = self.network([q, k])
        if len(scores.shape) == 4:
            scores = ops.squeeze(scores, -1)
        return scores

    def get_config(self):
        return {
            **super().get_config(),
            "network": keras.saving.serialize_keras_object(self.network),
        }
