"""Coverage attention and the coverage loss (See et al. 2017).

The coverage vector of decoder step `t` sums the attention distributions of
the steps before it, `c^t = sum_{t' < t} a^{t'}` (`c^0 = 0`), and enters the
additive score as one more key-side term:

    e^t_i = v^T tanh(W_h h_i + W_s s_t + w_c c^t_i + b)
    a^t = softmax(e^t)

so the model can see what it has already attended to. The coverage loss
`sum_i min(a^t_i, c^t_i)` penalises attending again to covered positions,
which curbs the repetition of sequence-to-sequence summarizers.
"""

import keras
from keras import ops

from keras_attn.layers.additive import BahdanauAttention, additive_scores
from keras_attn.layers.masking import (
    masked_softmax,
    softmax_dtype,
)
from keras_attn.training.loss_reduction import check_reduction, reduce_masked


@keras.saving.register_keras_serializable(package="keras_attn")
class CoverageAttention(BahdanauAttention):
    """Additive attention with a coverage vector (See et al. 2017).

    `e^t_i = v^T tanh(W_h h_i + W_s s_t + w_c c^t_i + b)`, where `h_i` are the
    keys, `s_t` the query of step `t`, `c^t = sum_{t' < t} a^{t'}` the
    coverage and `w_c` a learned `(units,)` vector. Without a coverage (or
    with a zero one) this is exactly `BahdanauAttention`.

    Two ways to run it:

    * Decoding, one step at a time: `memory = layer.prepare_memory(value,
      value_mask=mask)`, `coverage = layer.initial_coverage(memory)`, then per
      step `context, weights, coverage = layer.coverage_step(query, memory,
      coverage)` (or `layer.step(query, memory, coverage=coverage)` and
      `coverage += weights` yourself).
    * Teacher forcing, a whole query sequence `(batch, Tq, query_dim)` in
      `call`: since the weights of step `t` depend on those of the steps
      before, the steps run one after the other in a loop over `Tq`:
      `keras.ops.scan` on JAX (`lax.scan`) and PyTorch (a Python loop),
      `keras.ops.while_loop` with `maximum_iterations=Tq` on TensorFlow (a
      `tf.while_loop` whose gradient XLA compiles). `Tq` may be unknown
      (`None`) on TensorFlow, the loop compiles under `tf.function`, XLA and
      `jax.jit`, and gradients flow through the coverage into earlier
      steps. Only the cheap part (score
      and softmax) is in the loop: the keys and all queries are projected
      before it and the context is one matmul after it. Masked query
      positions (`query_mask`) do not add to the coverage.

    Args:
        units: Size of the hidden layer of the score.
        normalize: Weight-normalise `v` (as `BahdanauAttention`).
        use_bias: Whether the score has the bias `b`.
        kernel_initializer: Initializer of `W_h`, `W_s`, `v` and `w_c`.
        **kwargs: `BaseAttention` arguments (`dropout`, `seed`, `name`, ...).
            Dropout, if any, applies to the weights that make the context,
            never to those summed into the coverage.

    Call arguments:
        inputs: `[query, value]` or `[query, value, key]` (see
            `BaseAttention`); `query` is `(batch, Tq, query_dim)` or
            `(batch, query_dim)` for one step.
        coverage: Optional float `(batch, Tv)`: the coverage before the first
            query step (default zeros).
        return_attention_scores: Also return the weights `(batch, Tq, Tv)`,
            float32 (float64 in a float64 layer), as the coverage.
        return_coverage: Also return the coverage that entered the
            score of each step, `(batch, Tq, Tv)` (`c^t`, before adding
            `a^t`; what `coverage_loss` takes). For a rank-2 query it is the
            `(batch, Tv)` coverage passed in (or zeros).
        mask, query_mask, value_mask, use_causal_mask, training: As in
            `BaseAttention`.

    Returns:
        `context`, `(batch, Tq, value_dim)`; then `weights` if
        `return_attention_scores`; then `coverage` if `return_coverage`.

    Examples:
        >>> import numpy as np
        >>> from keras_attn import CoverageAttention, coverage_loss
        >>> rng = np.random.default_rng(0)
        >>> decoder_states = rng.random((2, 3, 8), dtype="float32")
        >>> encoder_outputs = rng.random((2, 5, 16), dtype="float32")
        >>> source_mask = np.array([[True] * 5, [True] * 4 + [False]])
        >>> target_mask = np.array([[True] * 3, [True] * 2 + [False]])
        >>> layer = CoverageAttention(units=32)
        >>> context, weights, coverage = layer(
        ...     [decoder_states, encoder_outputs],
        ...     value_mask=source_mask,
        ...     return_attention_scores=True,
        ...     return_coverage=True)
        >>> tuple(context.shape), tuple(weights.shape), tuple(coverage.shape)
        ((2, 3, 16), (2, 3, 5), (2, 3, 5))
        >>> loss = coverage_loss(weights, coverage, mask=target_mask)
        >>> tuple(loss.shape), float(loss) >= 0.0
        ((), True)
    """

    def _build_scores(self, query_dim, key_dim):
        super()._build_scores(query_dim, key_dim)
        self.coverage_kernel = self.add_weight(
            name="coverage_kernel",
            shape=(self.units,),
            initializer=self.kernel_initializer,
        )

    def _calculate_scores(self, query, keys, coverage=None):
        """Scores `(batch, Tq, Tv)`; `coverage` is `(batch, [Tq or 1,] Tv)`."""
        extra = None
        if coverage is not None:
            coverage = ops.cast(coverage, query.dtype)
            if len(coverage.shape) == 2:
                coverage = ops.expand_dims(coverage, 1)
            if len(coverage.shape) != 3:
                raise ValueError(
                    f"{self.__class__.__name__}: `coverage` must have shape "
                    "(batch, Tv) or (batch, Tq, Tv). Received coverage shape: "
                    f"{tuple(coverage.shape)}"
                )
            w_c = ops.cast(self.coverage_kernel, query.dtype)
            # (batch, Tq|1, Tv, 1) * (units,): the key-side term w_c c_i.
            extra = ops.expand_dims(coverage, -1) * w_c
        bias = None if self.bias is None else ops.cast(self.bias, query.dtype)
        return additive_scores(
            query, keys, self._score_vector(query.dtype), bias, extra
        )

    # ----------------------------------------------------------- decoding API

    def initial_coverage(self, memory):
        """Zero coverage `(batch, Tv)` (float32; float64 in a float64 layer)."""
        return ops.zeros_like(memory.mask, dtype=softmax_dtype(self.compute_dtype))

    def coverage_step(self, query, memory, coverage, training=None):
        """One decoder step that also returns the updated coverage.

        Args:
            query: `(batch, query_dim)`.
            memory: From `prepare_memory`.
            coverage: `(batch, Tv)`, the sum of the previous steps' weights
                (`initial_coverage(memory)` at the first step).
            training: Whether dropout applies.

        Returns:
            `(context, weights, new_coverage)`: `(batch, value_dim)`,
            `(batch, Tv)` and `(batch, Tv)` (`coverage + weights`), the last
            two float32 (float64 in a float64 layer).
            The coverage loss of this step is
            `coverage_loss(weights, coverage)` with the coverage passed in.
        """
        coverage = ops.cast(coverage, softmax_dtype(self.compute_dtype))
        context, weights = self.step(
            query, memory, training=training, coverage=coverage
        )
        return context, weights, coverage + weights

    # ----------------------------------------------------------- call

    def call(
        self,
        inputs,
        mask=None,
        query_mask=None,
        value_mask=None,
        coverage=None,
        return_attention_scores=False,
        return_coverage=False,
        use_causal_mask=False,
        training=None,
    ):
        query, value, key, query_mask, value_mask = self._unpack_inputs(
            inputs, mask, query_mask, value_mask
        )

        keys = self._project_keys(key)
        # The dtype of the weights and of the coverage: float32 (float64 in a
        # float64 layer), whatever the mixed-precision compute dtype.
        dtype = softmax_dtype(self.compute_dtype)
        if coverage is None:
            coverage = ops.zeros_like(keys[..., 0], dtype=dtype)
        coverage = ops.cast(coverage, dtype)
        if len(coverage.shape) != 2:
            raise ValueError(
                f"{self.__class__.__name__}: the initial `coverage` must have "
                "shape (batch, Tv). Received coverage shape: "
                f"{tuple(coverage.shape)}"
            )

        if len(query.shape) == 2:
            # One step: no recurrence, the base class does it all.
            context, weights = super().call(
                inputs,
                mask=mask,
                query_mask=query_mask,
                value_mask=value_mask,
                return_attention_scores=True,
                use_causal_mask=use_causal_mask,
                training=training,
                coverage=coverage,
            )
            return self._outputs(
                context,
                weights,
                coverage,
                return_attention_scores,
                return_coverage,
            )

        scores_mask = self._scores_mask(query, value, value_mask, use_causal_mask)
        coverages, weights = self._coverage_over_time(
            query, keys, coverage, query_mask, scores_mask
        )
        context = self._weighted_sum(weights, value, training)
        return self._outputs(
            context,
            weights,
            coverages,
            return_attention_scores,
            return_coverage,
        )

    def _coverage_over_time(self, query, keys, coverage, query_mask, scores_mask):
        """The step-by-step recurrence of a query sequence.

        Args:
            query: `(batch, Tq, query_dim)`, not projected.
            keys: Projected keys, `(batch, Tv, units)`.
            coverage: The coverage before the first step, `(batch, Tv)`.
            query_mask: Optional boolean `(batch, Tq)`.
            scores_mask: Optional boolean `(batch|1, 1|Tq, Tv)`.

        Returns:
            `(coverages, weights)`, both `(batch, Tq, Tv)`: the coverage that
            entered each step's score and each step's weights.
        """
        dtype = coverage.dtype
        # A (batch|1, 1, Tv) mask is the same at every step; one with a Tq
        # axis (causal) is looped over along with the queries.
        mask_per_step = scores_mask is not None and scores_mask.shape[1] != 1

        # Everything the steps read goes into one time-major `dtype` tensor
        # [query projection | step is valid | step's mask], one row a step
        # (Keras' TensorFlow `scan` also fails on several `xs` of unknown Tq).
        projected = self._project_query(query)
        units = projected.shape[-1]
        ones = ops.ones_like(projected[..., :1], dtype=dtype)
        columns = [ops.cast(projected, dtype)]
        if query_mask is None:
            columns.append(ones)
        else:
            columns.append(ops.expand_dims(ops.cast(query_mask, dtype), -1))
        if mask_per_step:
            columns.append(ops.cast(scores_mask, dtype) * ones)
        xs = ops.transpose(ops.concatenate(columns, axis=-1), (1, 0, 2))

        def one_step(cov, x):
            """`(coverage after, coverage before, weights)` of one step."""
            step_query = ops.cast(x[:, None, :units], projected.dtype)
            step_valid = x[:, units : units + 1]
            step_mask = scores_mask
            if mask_per_step:
                step_mask = ops.expand_dims(x[:, units + 1 :] > 0.5, 1)
            step_scores = self._calculate_scores(step_query, keys, coverage=cov)
            weights = ops.squeeze(masked_softmax(step_scores, step_mask), 1)
            # `where`, not a product: a NaN in a masked step stays out of the
            # coverage and of the loop's buffers.
            weights = ops.where(step_valid > 0.5, weights, ops.zeros_like(weights))
            return cov + weights, cov, weights

        loop = _while_over_time if _use_while_loop() else _scan_over_time
        coverages, weights = loop(one_step, coverage, xs)
        # Batch-major again; the reshape keeps the static shape known.
        full_shape = (*ops.shape(query)[:2], ops.shape(keys)[1])
        coverages = ops.reshape(ops.transpose(coverages, (1, 0, 2)), full_shape)
        weights = ops.reshape(ops.transpose(weights, (1, 0, 2)), full_shape)
        return coverages, weights

    @staticmethod
    def _outputs(context, weights, coverage, return_weights, return_coverage):
        outputs = (context,)
        if return_weights:
            outputs += (weights,)
        if return_coverage:
            outputs += (coverage,)
        return outputs[0] if len(outputs) == 1 else outputs

    def compute_output_spec(
        self,
        inputs,
        return_attention_scores=False,
        return_coverage=False,
        **kwargs,
    ):
        shapes = [tuple(x.shape) for x in inputs]
        context = keras.KerasTensor(
            self.compute_output_shape(shapes), dtype=self.compute_dtype
        )
        weights_shape = (*shapes[0][:-1], shapes[1][1])
        dtype = softmax_dtype(self.compute_dtype)
        weights = keras.KerasTensor(weights_shape, dtype=dtype)
        coverage = keras.KerasTensor(weights_shape, dtype=dtype)
        return self._outputs(
            context,
            weights,
            coverage,
            return_attention_scores,
            return_coverage,
        )


def _use_while_loop():
    # Keras' TensorFlow `scan` builds a `tf.while_loop` without
    # `maximum_iterations`, whose gradient XLA cannot compile (`fit` on a
    # GPU uses XLA by default). JAX needs `scan`: the gradient of
    # `lax.while_loop` does not exist.
    return keras.backend.backend() == "tensorflow"


def _scan_over_time(one_step, coverage, xs):
    """The recurrence as a `keras.ops.scan` (JAX: `lax.scan`; torch: a loop)."""

    def step(carry, x):
        new_cov, cov, weights = one_step(carry[0], x)
        # The outputs mirror the carry, as some backends' `scan` require.
        return (new_cov, weights), (cov, weights)

    _, (coverages, weights) = ops.scan(step, (coverage, ops.zeros_like(coverage)), xs)
    return coverages, weights


def _while_over_time(one_step, coverage, xs):
    """The recurrence as a `keras.ops.while_loop` bounded by `Tq`.

    `maximum_iterations` makes its gradient compile under XLA, even with an
    unknown `Tq`. Step `t` adds its outputs to `(Tq, batch, Tv)` buffers
    through a one-hot over time: `O(Tq)` more work per step, no scatter.
    """
    steps = ops.shape(xs)[0]
    positions = ops.arange(steps)
    # (Tq, 1, 1) * (1, batch, Tv): zeros of shape (Tq, batch, Tv).
    empty = ops.zeros_like(xs[:, :1, :1]) * ops.expand_dims(coverage, 0)

    def body(t, cov, coverages, weights):
        new_cov, cov, step_weights = one_step(cov, ops.take(xs, t, axis=0))
        hot = ops.cast(ops.equal(positions, t), coverage.dtype)[:, None, None]
        coverages = coverages + hot * ops.expand_dims(cov, 0)
        weights = weights + hot * ops.expand_dims(step_weights, 0)
        return t + 1, new_cov, coverages, weights

    _, _, coverages, weights = ops.while_loop(
        lambda t, *_: t < steps,
        body,
        (0, coverage, empty, empty),
        maximum_iterations=steps,
    )
    return coverages, weights


def coverage_loss(attention, coverage, mask=None, reduction="mean"):
    """Coverage loss (See et al. 2017): `sum_i min(a^t_i, c^t_i)` per step.

    Args:
        attention: Attention weights `a^t`, `(batch, Tq, Tv)`, or
            `(batch, Tv)` for one step.
        coverage: The coverage that entered each step's score, `c^t`, with
            the shape of `attention` (`return_coverage=True` of
            `CoverageAttention`, or the coverage passed to `coverage_step`).
        mask: Optional target mask, `(batch, Tq)` (`(batch,)` for one step);
            False or 0 marks padding steps, which add nothing.
        reduction: `"mean"` (the default): average over the valid target
            steps of the whole batch; `"sum"`: their sum; `"none"`: the
            per-step losses `(batch, Tq)`, zero at masked steps.

    Returns:
        A float32 (float64 for float64 inputs) scalar, or `(batch, Tq)`
        (`(batch,)`) for `"none"`.

    Examples:
        >>> import numpy as np
        >>> from keras_attn import coverage_loss
        >>> attention = np.array([[[0.5, 0.5], [0.875, 0.125]]], "float32")
        >>> coverage = np.array([[[0.0, 0.0], [0.5, 0.5]]], "float32")  # earlier steps
        >>> float(coverage_loss(attention, coverage))  # (0 + (0.5 + 0.125)) / 2 steps
        0.3125
    """
    check_reduction(reduction)
    dtype = softmax_dtype(attention.dtype)
    attention = ops.cast(attention, dtype)
    coverage = ops.cast(coverage, dtype)
    if len(attention.shape) not in (2, 3) or len(coverage.shape) != len(
        attention.shape
    ):
        raise ValueError(
            "`attention` and `coverage` must both have shape (batch, Tq, Tv) "
            "or both (batch, Tv). Received attention shape "
            f"{tuple(attention.shape)} and coverage shape "
            f"{tuple(coverage.shape)}"
        )
    per_step = ops.sum(ops.minimum(attention, coverage), axis=-1)
    return reduce_masked(per_step, mask, reduction)


__all__ = ["CoverageAttention", "coverage_loss"]
