"""The base attention layer: masks, softmax, context, and the decoding step.

Subclasses only say how a query meets a key, through three small hooks:

* `_build_scores(query_dim, key_dim)`: create the score's weights.
* `_project_keys(key)`: the part of the score that depends on the keys alone.
  It runs once per source sequence (`prepare_memory`), never per decoder step.
* `_project_query(query)`: the part that depends on the query alone, row
  by row (`(..., query_dim)`): `step` projects its rank-2 query.
* `_calculate_scores(query, keys)`: projected query `(batch, Tq, *)` against
  projected keys `(batch, Tv, *)`, giving scores `(batch, Tq, Tv)`.
"""

from typing import NamedTuple

import keras
from keras import ops

from keras_attn.arguments import CheckedConstructor
from keras_attn.layers.masking import (
    as_dtype,
    causal_mask,
    check_mask,
    combine_masks,
    keras_mask,
    masked_softmax,
    softmax_dtype,
)


class AttentionMemory(NamedTuple):
    """What a decoder attends over, prepared once per source sequence.

    Attributes:
        keys: Projected keys, `(batch, Tv, units)`: the output of the layer's
            `_project_keys`, so a decoder step never re-projects the memory.
        values: Values, `(batch, Tv, value_dim)`.
        mask: Boolean, `(batch, Tv)`; False marks padding.

    Examples:
        >>> import numpy as np
        >>> from keras_attn import BahdanauAttention
        >>> layer = BahdanauAttention(units=16)
        >>> layer.build([(2, 4), (2, 5, 8)])  # query and value shapes
        >>> memory = layer.prepare_memory(np.ones((2, 5, 8), "float32"))
        >>> [tuple(x.shape) for x in (memory.keys, memory.values, memory.mask)]
        [(2, 5, 16), (2, 5, 8), (2, 5)]
    """

    keys: object
    values: object
    mask: object


def _check_memory_batch(query, values):
    """A one-line ValueError when the query's and the memory's batch differ.

    The mistake of a beam step over a memory that was not tiled for the beam,
    caught before the backend's own batch-dimension error.

    Args:
        query: The query, its batch first.
        values: The memory's values, `(batch, Tv, value_dim)`.
    """
    rows, memory_rows = query.shape[0], values.shape[0]
    # Only static sizes compare: JAX's shape inference gives symbolic ones.
    if not (isinstance(rows, int) and isinstance(memory_rows, int)):
        return
    if rows == memory_rows:
        return
    raise ValueError(
        f"`query` must have the batch size of `memory`, {int(memory_rows)} "
        f"rows. Received: query with shape {tuple(query.shape)}. In a beam "
        "search of `beam_size` beams the step sees batch * beam_size rows: "
        "tile the memory with `keras_attn.tile_batch(memory, beam_size)`."
    )


class BaseAttention(CheckedConstructor, keras.layers.Layer):
    """Attention from a query over keys and values; subclasses give the score.

    With query `q`, keys `k_i` and values `v_i` (keys default to the values):
    `alpha = softmax_i(score(q, k_i))` and `context = sum_i alpha_i v_i`.

    Args:
        dropout: Fraction of the attention weights to drop in training.
        seed: Seed of the dropout.
        **kwargs: Base `Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `[query, value]` or `[query, value, key]`:

            - `query`: `(batch, Tq, query_dim)`, or `(batch, query_dim)` for a
              single decoder step.
            - `value`: `(batch, Tv, value_dim)`.
            - `key`: optional, `(batch, Tv, key_dim)`; defaults to `value`.
        mask: Masks propagated by Keras, `[query_mask, value_mask]`. When
            Keras does not fill it (a call with a tensor `value_mask=`, say),
            the masks the query and value tensors carry are used.
        query_mask: Optional boolean `(batch, Tq)`; masked query positions get
            a zero context. Overrides the propagated query mask.
        value_mask: Optional boolean `(batch, Tv)`; masked values get zero
            weight. Overrides the propagated value mask. A vector of lengths
            is refused: `keras.ops.arange(Tv)[None] < lengths[:, None]` is
            its mask.
        return_attention_scores: If True, also return the attention weights,
            float32 (float64 for a float64 layer), `(batch, Tq, Tv)`
            (`(batch, Tv)` for a rank-2 query).
        use_causal_mask: If True, query position `i` sees values `<= i`
            (self-attention in a decoder).
        training: Whether dropout applies.

    Returns:
        The context, `(batch, Tq, value_dim)` (`(batch, value_dim)` for a
        rank-2 query), in the layer's compute dtype; and the weights if asked.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn import DotAttention
        >>> rng = np.random.default_rng(0)
        >>> encoder_outputs = rng.random((2, 5, 8), dtype="float32")
        >>> source_mask = np.array([[True] * 5, [True] * 3 + [False] * 2])
        >>> layer = DotAttention()  # any subclass: the memory once, then steps
        >>> layer.build([(2, 8), (2, 5, 8)])  # query and value shapes
        >>> memory = layer.prepare_memory(encoder_outputs, value_mask=source_mask)
        >>> decoder_state = rng.random((2, 8), dtype="float32")
        >>> context, weights = layer.step(decoder_state, memory)
        >>> tuple(context.shape), tuple(weights.shape)
        ((2, 8), (2, 5))
        >>> ops.convert_to_numpy(weights)[1, 3:].tolist()  # padding gets no weight
        [0.0, 0.0]
    """

    def __init__(self, dropout=0.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(
                f"`dropout` must be in [0, 1). Received: dropout={dropout}"
            )
        self.dropout = dropout
        self.seed = seed
        self.supports_masking = True
        if dropout > 0:
            self.seed_generator = keras.random.SeedGenerator(seed)

    # ----------------------------------------------------------- hooks

    def _build_scores(self, query_dim, key_dim):
        """Creates the score's weights. Default: none."""

    def _project_keys(self, key):
        """Key-only part of the score, computed once per memory."""
        return key

    def _project_query(self, query):
        """Query-only part of the score, computed once per query."""
        return query

    def _calculate_scores(self, query, keys):
        """Scores `(batch, Tq, Tv)` of projected queries against keys."""
        raise NotImplementedError(
            f"{self.__class__.__name__} must implement `_calculate_scores`."
        )

    def _apply_scores(self, scores, values, scores_mask=None, training=None):
        """Masked float32 softmax, dropout, weighted sum of the values.

        Returns:
            `(context, weights)`: `(batch, Tq, value_dim)` in the values'
            dtype and float32 (float64 in a float64 layer) `(batch, Tq, Tv)`.
        """
        weights = masked_softmax(scores, scores_mask)
        return self._weighted_sum(weights, values, training), weights

    def _weighted_sum(self, weights, values, training=None):
        """The context: dropout on the weights in training, then `weights @ values`.

        Args:
            weights: `(batch, Tq, Tv)` attention weights.
            values: `(batch, Tv, value_dim)`.

        Returns:
            `(batch, Tq, value_dim)` in the values' dtype.
        """
        if training and self.dropout > 0:
            weights = keras.random.dropout(
                weights, self.dropout, seed=self.seed_generator
            )
        return ops.matmul(as_dtype(weights, values.dtype), values)

    # ----------------------------------------------------------- build

    def build(self, input_shape):
        query_shape, value_shape, key_shape = self._validate_shapes(input_shape)
        self._build_scores(int(query_shape[-1]), int(key_shape[-1]))
        self.built = True

    def _validate_shapes(self, input_shape):
        name = self.__class__.__name__
        if (
            not isinstance(input_shape, (list, tuple))
            or len(input_shape) not in (2, 3)
            or not isinstance(input_shape[0], (list, tuple))
        ):
            raise ValueError(
                f"{name} must be called on a list [query, value] or "
                f"[query, value, key]. Received input shapes: {input_shape}"
            )
        query_shape, value_shape = input_shape[0], input_shape[1]
        key_shape = input_shape[2] if len(input_shape) == 3 else value_shape
        if len(query_shape) not in (2, 3):
            raise ValueError(
                f"{name}: query must have rank 3 (batch, Tq, dim) or rank 2 "
                f"(batch, dim). Received query shape: {tuple(query_shape)}"
            )
        for label, shape in (("value", value_shape), ("key", key_shape)):
            if len(shape) != 3:
                raise ValueError(
                    f"{name}: {label} must have rank 3 (batch, Tv, dim). "
                    f"Received {label} shape: {tuple(shape)}"
                )
        if (
            value_shape[1] is not None
            and key_shape[1] is not None
            and value_shape[1] != key_shape[1]
        ):
            raise ValueError(
                f"{name}: key and value must have the same length Tv. "
                f"Received key shape {tuple(key_shape)} and value shape "
                f"{tuple(value_shape)}"
            )
        for label, shape in (("query", query_shape), ("key", key_shape)):
            if shape[-1] is None:
                raise ValueError(
                    f"{name}: the last dimension of the {label} must be "
                    f"known. Received {label} shape: {tuple(shape)}"
                )
        return query_shape, value_shape, key_shape

    # ----------------------------------------------------------- decoding API

    def prepare_memory(self, value, key=None, value_mask=None):
        """Projects the memory once, for attention at every decoder step.

        Args:
            value: `(batch, Tv, value_dim)`.
            key: Optional `(batch, Tv, key_dim)`; defaults to `value`.
            value_mask: Optional boolean `(batch, Tv)`; defaults to the mask
                Keras propagated with `value` (an `Embedding(mask_zero=True)`
                upstream), else no padding.

        Returns:
            An `AttentionMemory` to pass to `step`.
        """
        if not self.built:
            raise ValueError(
                f"{self.__class__.__name__} is not built: call it once on "
                "[query, value] or call `build([query_shape, value_shape])` "
                "before `prepare_memory`."
            )
        key = value if key is None else key
        if value_mask is None:
            value_mask = keras_mask(value)
        check_mask(value_mask, "value_mask", value)
        if value_mask is None:
            value_mask = ops.ones(ops.shape(value)[:2], dtype="bool")
        return AttentionMemory(
            keys=self._project_keys(key),
            values=value,
            mask=ops.cast(value_mask, "bool"),
        )

    def step(self, query, memory, training=None, **score_kwargs):
        """One decoder step: a rank-2 query against a prepared memory.

        Args:
            query: `(batch, query_dim)`.
            memory: From `prepare_memory`.
            **score_kwargs: Extra inputs of the score (coverage, say).

        Returns:
            `(context, weights)`: `(batch, value_dim)` and float32
            `(batch, Tv)`.
        """
        _check_memory_batch(query, memory.values)
        # The rank-2 query is projected before it gets its time axis: a
        # rank-3 `matmul` is a `tensordot` on TensorFlow, whose gradient
        # inside a `while_loop` XLA cannot compile (its permutation is no
        # compile-time constant there) once the batch or memory length varies.
        query = ops.convert_to_tensor(query)
        context, weights = self._attend(
            ops.expand_dims(self._project_query(query), 1),
            memory,
            scores_mask=ops.expand_dims(memory.mask, 1),
            training=training,
            **score_kwargs,
        )
        return ops.squeeze(context, 1), ops.squeeze(weights, 1)

    def scores(self, query, memory, **score_kwargs):
        """The unnormalized scores of a query against a prepared memory.

        The logits whose masked softmax `step` and `call` take, unmasked:
        what a pointer network normalizes itself
        (`pointer_network_log_probs`).

        Args:
            query: `(batch, query_dim)` or `(batch, Tq, query_dim)`.
            memory: From `prepare_memory`.
            **score_kwargs: Extra inputs of the score (coverage, say).

        Returns:
            `(batch, Tv)` for a rank-2 query, else `(batch, Tq, Tv)`, in the
            layer's compute dtype.

        Examples:
            >>> import numpy as np
            >>> from keras import ops
            >>> from keras_attn import DotAttention
            >>> layer = DotAttention()
            >>> layer.build([(1, 2), (1, 3, 2)])
            >>> keys = np.array([[[1, 0], [0, 1], [1, 1]]], "float32")
            >>> memory = layer.prepare_memory(keys)
            >>> query = np.array([[1, 2]], "float32")
            >>> ops.convert_to_numpy(layer.scores(query, memory)).tolist()
            [[1.0, 2.0, 3.0]]
        """
        _check_memory_batch(query, memory.values)
        # Projected before the time axis, as in `step`.
        query = ops.convert_to_tensor(query)
        projected = self._project_query(query)
        if len(query.shape) == 3:
            return self._calculate_scores(projected, memory.keys, **score_kwargs)
        projected = ops.expand_dims(projected, 1)
        scores = self._calculate_scores(projected, memory.keys, **score_kwargs)
        return ops.squeeze(scores, 1)

    def _attend(self, projected_query, memory, scores_mask, training, **score_kwargs):
        scores = self._calculate_scores(projected_query, memory.keys, **score_kwargs)
        return self._apply_scores(
            scores, memory.values, scores_mask=scores_mask, training=training
        )

    # ----------------------------------------------------------- call

    def _unpack_inputs(self, inputs, mask, query_mask, value_mask):
        """`(query, value, key, query_mask, value_mask)`; explicit masks win,
        then `mask`, then the masks the tensors carry."""
        self._validate_shapes([tuple(x.shape) for x in inputs])
        query, value = inputs[0], inputs[1]
        _check_memory_batch(query, value)
        key = inputs[2] if len(inputs) > 2 else value
        mask = list(mask) if mask is not None else [None, None]
        if query_mask is None:
            query_mask = mask[0] if mask[0] is not None else keras_mask(query)
        if value_mask is None:
            value_mask = mask[1] if mask[1] is not None else keras_mask(value)
        if len(query.shape) == 3:
            check_mask(query_mask, "query_mask", query, "Tq")
        check_mask(value_mask, "value_mask", value)
        return query, value, key, query_mask, value_mask

    @staticmethod
    def _scores_mask(query, value, value_mask, use_causal_mask):
        """Boolean `(batch|1, 1|Tq, Tv)` mask of the scores, or None."""
        scores_mask = None
        if value_mask is not None:
            scores_mask = ops.expand_dims(ops.cast(value_mask, "bool"), 1)
        if use_causal_mask:
            causal = causal_mask(ops.shape(query)[1], ops.shape(value)[1])
            scores_mask = combine_masks(scores_mask, causal)
        return scores_mask

    def call(
        self,
        inputs,
        mask=None,
        query_mask=None,
        value_mask=None,
        return_attention_scores=False,
        use_causal_mask=False,
        training=None,
        **score_kwargs,
    ):
        query, value, key, query_mask, value_mask = self._unpack_inputs(
            inputs, mask, query_mask, value_mask
        )

        single_step = len(query.shape) == 2
        if single_step:
            query = ops.expand_dims(query, 1)
            if query_mask is not None:
                query_mask = ops.expand_dims(query_mask, 1)

        memory = AttentionMemory(self._project_keys(key), value, None)
        scores_mask = self._scores_mask(query, value, value_mask, use_causal_mask)
        context, weights = self._attend(
            self._project_query(query), memory, scores_mask, training, **score_kwargs
        )
        if query_mask is not None:
            # `where`, not a product: a NaN in a masked row is cleared too.
            query_mask = ops.expand_dims(ops.cast(query_mask, "bool"), -1)
            context = ops.where(query_mask, context, ops.zeros_like(context))
            weights = ops.where(query_mask, weights, ops.zeros_like(weights))
        if single_step:
            context, weights = ops.squeeze(context, 1), ops.squeeze(weights, 1)
        if return_attention_scores:
            return context, weights
        return context

    def compute_mask(self, inputs, mask=None):
        if len(inputs[0].shape) == 2:
            return None
        query_mask = None if mask is None else mask[0]
        return keras_mask(inputs[0]) if query_mask is None else query_mask

    def compute_output_shape(self, input_shape):
        query_shape, value_shape, _ = self._validate_shapes(input_shape)
        return (*query_shape[:-1], value_shape[-1])

    def compute_output_spec(self, inputs, return_attention_scores=False, **kwargs):
        shapes = [tuple(x.shape) for x in inputs]
        context = keras.KerasTensor(
            self.compute_output_shape(shapes), dtype=self.compute_dtype
        )
        if not return_attention_scores:
            return context
        weights_shape = (*shapes[0][:-1], shapes[1][1])
        return context, keras.KerasTensor(
            weights_shape, dtype=softmax_dtype(self.compute_dtype)
        )

    def get_config(self):
        config = super().get_config()
        config.update({"dropout": self.dropout, "seed": self.seed})
        return config
