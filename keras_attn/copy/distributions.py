"""Copying from the source: the pointer-generator (See et al. 2017).

A pointer network (Vinyals et al. 2015) outputs the attention distribution
itself as a distribution over source positions. The pointer-generator mixes
it with the decoder's vocabulary distribution through a soft switch:

    p_gen = sigmoid(w_c . c_t + w_s . s_t + w_x . x_t + b)
    P(w) = p_gen * P_vocab(w) + (1 - p_gen) * sum_{i: src_i = w} a^t_i

over an extended vocabulary: the `vocab_size` words of the decoder, then one
slot per out-of-vocabulary (OOV) source word. The `k`-th distinct OOV word
of a source sequence gets the id `vocab_size + k` in `source_ids` (and in the
targets), so the model can copy words it cannot generate.

* `PointerGenerator` (`keras_attn.copy.pointer_generator`): the layer that
  computes `p_gen`.
* `pointer_generator_distribution`: the full extended distribution, for
  decoding (`pointer_generator_log_distribution`: its log, from logits). The
  copy part is a scatter-add (`keras.ops.segment_sum`) of the attention onto
  the source ids, so repeated source words add up, and it never builds a
  `(batch, Tv, vocab)` one-hot.
* `target_probabilities` and `pointer_generator_nll`: training, where only the target
  words' probabilities are needed: the copy part is
  `sum_i a_i [src_i == target]`, `O(Tv)` per step instead of `O(vocab)`.

All probabilities are float32, whatever the layers' dtype policy.
"""

from keras import ops

from keras_attn.copy.pointer_generator import PointerGenerator
from keras_attn.copy.source_words import source_word_scores, write_rows
from keras_attn.padding import pad_end
from keras_attn.training.loss_reduction import check_reduction, reduce_masked

_NEG_INF = float("-inf")


# --------------------------------------------------------------- helpers


def _vocab_probs(vocab_probs, from_logits):
    vocab_probs = ops.cast(vocab_probs, "float32")
    if from_logits:
        return ops.softmax(vocab_probs, axis=-1)
    return vocab_probs


def check_copy_inputs(p_gen, vocab, attention, source_ids):
    """float32 `p_gen (..., 1)` and int32 ids broadcastable to `attention`."""
    p_gen = ops.cast(p_gen, "float32")
    attention = ops.cast(attention, "float32")
    if len(p_gen.shape) == len(vocab.shape) - 1:
        p_gen = ops.expand_dims(p_gen, -1)
    if len(p_gen.shape) != len(vocab.shape) or p_gen.shape[-1] not in (1, None):
        raise ValueError(
            "`p_gen` must have shape (..., 1) (or (...,)) with the leading "
            f"dimensions of `vocab_probs` {tuple(vocab.shape)}. Received "
            f"p_gen shape: {tuple(p_gen.shape)}"
        )
    if len(attention.shape) != len(vocab.shape):
        raise ValueError(
            "`attention` (..., Tv) must have the leading dimensions of "
            f"`vocab_probs` {tuple(vocab.shape)}. Received attention shape: "
            f"{tuple(attention.shape)}"
        )
    source_ids = _source_ids(source_ids, attention)
    return p_gen, attention, source_ids


def _source_ids(source_ids, attention):
    """int32 source ids with the rank of `attention`."""
    source_ids = ops.cast(source_ids, "int32")
    if len(source_ids.shape) == len(attention.shape) - 1 == 2:
        # (batch, Tv) ids shared by the T decoder steps.
        source_ids = ops.expand_dims(source_ids, 1)
    if len(source_ids.shape) != len(attention.shape) or (
        source_ids.shape[-1] is not None
        and attention.shape[-1] is not None
        and source_ids.shape[-1] != attention.shape[-1]
    ):
        raise ValueError(
            "`source_ids` must have shape (batch, Tv) (or that of "
            f"`attention`), with attention shape {tuple(attention.shape)}. "
            f"Received source_ids shape: {tuple(source_ids.shape)}"
        )
    return source_ids


# --------------------------------------------------------------- decoding


def copy_distribution(attention, source_ids, extended_vocab_size):
    """Attention summed onto the source words: `sum_{i: src_i = w} a_i`.

    A scatter-add (`keras.ops.segment_sum`, which sums duplicate ids on every
    backend): memory and time `O(rows * (Tv + extended_vocab_size))`, no
    one-hot.

    Args:
        attention: `(batch, [T,] Tv)` weights over the source positions.
        source_ids: int `(batch, Tv)` (or the shape of `attention`), ids in
            `[0, extended_vocab_size)`. Padding positions may hold any valid
            id: their attention weight is zero.
        extended_vocab_size: Python int, `vocab_size + num_oov`.

    Returns:
        float32 `(batch, [T,] extended_vocab_size)`.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn import copy_distribution
        >>> attention = np.array([[0.5, 0.25, 0.25]], "float32")
        >>> source_ids = np.array([[4, 2, 4]], "int32")  # word 4 twice
        >>> ops.convert_to_numpy(copy_distribution(attention, source_ids, 6)).tolist()
        [[0.0, 0.0, 0.25, 0.0, 0.75, 0.0]]
    """
    if not isinstance(extended_vocab_size, int) or extended_vocab_size <= 0:
        raise ValueError(
            "`extended_vocab_size` must be a positive Python int. Received: "
            f"extended_vocab_size={extended_vocab_size!r}"
        )
    attention = ops.cast(attention, "float32")
    source_ids = _source_ids(source_ids, attention)
    source_ids = source_ids + ops.zeros_like(attention, dtype="int32")
    leading = ops.shape(attention)[:-1]
    length = ops.shape(attention)[-1]
    flat_weights = ops.reshape(attention, (-1, length))
    flat_ids = ops.reshape(source_ids, (-1, length))
    rows = ops.shape(flat_weights)[0]
    # Row r's word w goes to segment r * V + w of one flat vector.
    offsets = ops.expand_dims(ops.arange(rows, dtype="int32"), 1)
    segments = flat_ids + offsets * extended_vocab_size
    summed = ops.segment_sum(
        ops.reshape(flat_weights, (-1,)),
        ops.reshape(segments, (-1,)),
        num_segments=rows * extended_vocab_size,
    )
    return ops.reshape(summed, (*leading, extended_vocab_size))


def _check_num_oov(num_oov):
    if not isinstance(num_oov, int) or num_oov < 0:
        raise ValueError(
            f"`num_oov` must be a non-negative Python int. Received: "
            f"num_oov={num_oov!r}"
        )


def pointer_generator_distribution(
    p_gen, vocab_probs, attention, source_ids, num_oov=0, from_logits=False
):
    """The pointer-generator's distribution over the extended vocabulary.

    `P(w) = p_gen P_vocab(w) + (1 - p_gen) sum_{i: src_i = w} a_i`, where
    `P_vocab` is zero on the OOV slots `w >= vocab_size`.

    Args:
        p_gen: `(batch, [T,] 1)` (or `(batch, [T])`), from `PointerGenerator`.
        vocab_probs: `(batch, [T,] vocab_size)` probabilities (logits if
            `from_logits`). `vocab_size` must be static.
        attention: `(batch, [T,] Tv)` attention weights (zero on padding).
        source_ids: int `(batch, Tv)` (or the shape of `attention`): source
            words in the extended vocabulary, OOVs as `vocab_size + k`.
        num_oov: Python int, the number of OOV slots (at least the largest
            number of distinct OOVs of a source sequence in the batch).
        from_logits: Whether `vocab_probs` are logits (softmax in float32).

    Returns:
        float32 `(batch, [T,] vocab_size + num_oov)`; each row sums to 1 when
        the rows of `vocab_probs` and `attention` do.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> import keras_attn as ka
        >>> p_gen = np.array([[0.5]], "float32")
        >>> vocab_probs = np.full((1, 4), 0.25, "float32")  # vocab_size 4
        >>> attention = np.array([[0.5, 0.5]], "float32")
        >>> source_ids = np.array([[1, 4]], "int32")  # 4: the first OOV slot
        >>> probs = ka.pointer_generator_distribution(
        ...     p_gen, vocab_probs, attention, source_ids, num_oov=1)
        >>> ops.convert_to_numpy(probs).tolist()
        [[0.125, 0.375, 0.125, 0.125, 0.25]]
    """
    _check_num_oov(num_oov)
    vocab = _vocab_probs(vocab_probs, from_logits)
    vocab_size = vocab.shape[-1]
    if vocab_size is None:
        raise ValueError(
            "The last dimension of `vocab_probs` must be known. Received "
            f"vocab_probs shape: {tuple(vocab.shape)}"
        )
    p_gen, attention, source_ids = check_copy_inputs(
        p_gen, vocab, attention, source_ids
    )
    generated = p_gen * vocab
    if num_oov:
        generated = pad_end(generated, num_oov)
    copied = copy_distribution(
        (1.0 - p_gen) * attention, source_ids, vocab_size + num_oov
    )
    return generated + copied


def log_partition(logits):
    """`logsumexp(logits)` over the last axis, kept: `max z - log max softmax(z)`.

    The softmax is at least `1 / V` at the maximum, so its log is well
    conditioned: the result is within an ulp or two of `ops.logsumexp`. On
    TensorFlow's CPU executor the softmax is one fused kernel, where
    `logsumexp` is four passes over the `(N, V)` logits (max, subtract, exp,
    sum). A row all `-inf` gives `-inf`, as `logsumexp` does.
    """
    top = ops.max(logits, axis=-1, keepdims=True)
    peak = ops.max(ops.softmax(logits, axis=-1), axis=-1, keepdims=True)
    return ops.where(ops.isfinite(top), top - ops.log(peak), top)


def pointer_generator_log_distribution(p_gen, logits, attention, source_ids, num_oov=0):
    """`log pointer_generator_distribution(...)` of one decoding step, from logits.

    A word absent from the source gets `log p_gen + z_w - logsumexp(z)`, one
    pass over the vocabulary, and the `Tv` source words' mixtures with the
    copy distribution are written over it (an `O(Tv^2)` comparison per row).
    No softmax and no log over the vocabulary (fewer passes over the largest
    tensor of a decoding step), and no probability underflows to `log 0`.

    Args:
        p_gen: `(batch, 1)` (or `(batch,)`), from `PointerGenerator`.
        logits: `(batch, vocab_size)` vocabulary logits; `vocab_size` must
            be static.
        attention: `(batch, Tv)` attention weights (zero on padding).
        source_ids: int `(batch, Tv)`: source words in the extended
            vocabulary, OOVs as `vocab_size + k`, all below
            `vocab_size + num_oov`.
        num_oov: Python int, the number of OOV slots.

    Returns:
        float32 `(batch, vocab_size + num_oov)` log-probabilities, `-inf`
        where the probability is 0 (OOV slots no source word holds).

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> import keras_attn as ka
        >>> p_gen = np.array([[0.5]], "float32")
        >>> vocab_probs = np.full((1, 4), 0.25, "float32")  # vocab_size 4
        >>> attention = np.array([[0.5, 0.5]], "float32")
        >>> source_ids = np.array([[1, 4]], "int32")  # 4: the first OOV slot
        >>> logits = np.zeros((1, 4), "float32")  # the uniform vocab_probs
        >>> log_probs = ka.pointer_generator_log_distribution(
        ...     p_gen, logits, attention, source_ids, num_oov=1)
        >>> np.exp(ops.convert_to_numpy(log_probs), dtype="float64").round(4).tolist()
        [[0.125, 0.375, 0.125, 0.125, 0.25]]
    """
    logits = ops.cast(logits, "float32")
    if len(logits.shape) != 2 or logits.shape[-1] is None:
        raise ValueError(
            "`logits` must have shape (batch, vocab_size) with a static "
            f"vocab_size. Received logits shape: {tuple(logits.shape)}"
        )
    _check_num_oov(num_oov)
    vocab_size = logits.shape[-1]
    p_gen, attention, source_ids = check_copy_inputs(
        p_gen, logits, attention, source_ids
    )
    offset = ops.log(p_gen) - log_partition(logits)
    in_vocab = ops.less(source_ids, vocab_size)
    source_logits = ops.take_along_axis(
        logits, ops.minimum(source_ids, vocab_size - 1), axis=-1
    )
    # The same sum as the other words' `logits + offset`, to the last bit.
    source_generated = ops.where(in_vocab, source_logits + offset, _NEG_INF)
    generated = logits + offset
    if num_oov:
        generated = pad_end(generated, num_oov, _NEG_INF)
    source_scores = source_word_scores(source_generated, source_ids, p_gen, attention)
    return write_rows(generated, source_ids, source_scores)


def write_source_words(generated, source_log_vocab, source_ids, p_gen, attention):
    """`generated` with each source word's entry mixed with its copy mass.

    Args:
        generated: float32 `(batch, V')`: `log p_gen + log P_vocab(w)` for
            every word `w` of the extended vocabulary (`-inf` for OOVs).
        source_log_vocab: float32 `(batch, Tv)`: `log P_vocab` of each source
            position's word (`-inf` for an OOV).
        source_ids: int32 `(batch, Tv)`, extended ids, below `V'`.
        p_gen: float32 `(batch, 1)`, or None: no copying, the entries are
            `source_log_vocab` as they are.
        attention: `(batch, Tv)` weights (zero on padding); unused without
            `p_gen`.

    Returns:
        float32 `(batch, V')`.
    """
    if p_gen is None:
        source_log_probs = source_log_vocab
    else:
        source_log_probs = source_word_scores(
            source_log_vocab + ops.log(p_gen), source_ids, p_gen, attention
        )
    return write_rows(generated, source_ids, source_log_probs)


# --------------------------------------------------------------- training


def target_probabilities(
    p_gen, vocab_probs, attention, source_ids, target_ids, from_logits=False
):
    """`P(target)` of the pointer-generator, without the full distribution.

    `P(y) = p_gen P_vocab(y) [y < vocab_size] + (1 - p_gen) sum_i a_i
    [src_i == y]`: a gather from `vocab_probs` and an `O(Tv)` comparison per
    step. Equal to gathering `pointer_generator_distribution(...)` at
    `target_ids`.

    Args:
        p_gen: `(batch, [T,] 1)` (or `(batch, [T])`).
        vocab_probs: `(batch, [T,] vocab_size)` probabilities (logits if
            `from_logits`).
        attention: `(batch, [T,] Tv)`.
        source_ids: int `(batch, Tv)` (or the shape of `attention`), in the
            extended vocabulary.
        target_ids: int `(batch, [T])`, in the extended vocabulary. A target
            OOV absent from the source has probability 0: map those to the
            UNK id.
        from_logits: Whether `vocab_probs` are logits.

    Returns:
        float32 `(batch, [T])`.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> import keras_attn as ka
        >>> p_gen = np.array([[0.5]], "float32")
        >>> vocab_probs = np.full((1, 4), 0.25, "float32")  # vocab_size 4
        >>> attention = np.array([[0.5, 0.5]], "float32")
        >>> source_ids = np.array([[1, 4]], "int32")  # 4: the first OOV slot
        >>> target_ids = np.array([1], "int32")  # (batch,): one step
        >>> ops.convert_to_numpy(ka.target_probabilities(
        ...     p_gen, vocab_probs, attention, source_ids, target_ids)).tolist()
        [0.375]
    """
    vocab = ops.cast(vocab_probs, "float32")
    vocab_size = vocab.shape[-1]
    if vocab_size is None:
        raise ValueError(
            "The last dimension of `vocab_probs` must be known. Received "
            f"vocab_probs shape: {tuple(vocab.shape)}"
        )
    p_gen, attention, source_ids = check_copy_inputs(
        p_gen, vocab, attention, source_ids
    )
    target_ids = ops.cast(target_ids, "int32")
    if len(target_ids.shape) != len(vocab.shape) - 1:
        raise ValueError(
            "`target_ids` must have the leading dimensions of `vocab_probs` "
            f"{tuple(vocab.shape)}. Received target_ids shape: "
            f"{tuple(target_ids.shape)}"
        )
    targets = ops.expand_dims(target_ids, -1)
    in_vocab = ops.cast(ops.less(target_ids, vocab_size), "float32")
    gathered = ops.take_along_axis(
        vocab, ops.clip(targets, 0, vocab_size - 1), axis=-1
    )[..., 0]
    if from_logits:
        # exp(z_y - logsumexp(z)): no softmax over the vocabulary kept.
        gathered = ops.exp(gathered - ops.logsumexp(vocab, axis=-1))
    return _mix(p_gen[..., 0], gathered * in_vocab, attention, source_ids, target_ids)


def _mix(p_gen, generated, attention, source_ids, target_ids):
    is_target = ops.cast(
        ops.equal(source_ids, ops.expand_dims(target_ids, -1)), "float32"
    )
    copied = ops.sum(attention * is_target, axis=-1)
    return p_gen * generated + (1.0 - p_gen) * copied


def mix_target_probabilities(
    p_gen, target_vocab_probs, attention, source_ids, target_ids
):
    """`P(target)` of the pointer-generator from `P_vocab(target)` alone.

    For output layers that never build the full vocabulary distribution
    (a sampled softmax in training): `p_gen P_vocab(y) + (1 - p_gen) sum_i
    a_i [src_i == y]`.

    Args:
        p_gen: `(batch, [T,] 1)` (or `(batch, [T])`).
        target_vocab_probs: `(batch, [T])`: the generator's probability of
            each target, 0 where the target is out of its vocabulary.
        attention: `(batch, [T,] Tv)`.
        source_ids: int `(batch, Tv)` (or the shape of `attention`), in the
            extended vocabulary.
        target_ids: int `(batch, [T])`, in the extended vocabulary.

    Returns:
        float32 `(batch, [T])`.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> import keras_attn as ka
        >>> p_gen = np.array([[0.5]], "float32")
        >>> vocab_probs = np.full((1, 4), 0.25, "float32")  # vocab_size 4
        >>> attention = np.array([[0.5, 0.5]], "float32")
        >>> source_ids = np.array([[1, 4]], "int32")  # 4: the first OOV slot
        >>> target_ids = np.array([1], "int32")
        >>> target_vocab_probs = np.array([0.25], "float32")  # P_vocab(target)
        >>> ops.convert_to_numpy(ka.mix_target_probabilities(
        ...     p_gen, target_vocab_probs, attention, source_ids, target_ids)).tolist()
        [0.375]
    """
    generated = ops.cast(target_vocab_probs, "float32")
    # A stand-in of the vocabulary's rank, for the shape checks.
    p_gen, attention, source_ids = check_copy_inputs(
        p_gen, ops.expand_dims(generated, -1), attention, source_ids
    )
    target_ids = ops.cast(target_ids, "int32")
    return _mix(p_gen[..., 0], generated, attention, source_ids, target_ids)


def pointer_generator_nll(
    p_gen,
    vocab_probs,
    attention,
    source_ids,
    target_ids,
    mask=None,
    from_logits=False,
    epsilon=1e-10,
    reduction="mean",
):
    """Negative log-likelihood of the targets under the pointer-generator.

    `-log(P(y) + epsilon)` with `P(y)` from `target_probabilities`, in
    float32. The `epsilon` keeps the loss and its gradient finite where
    `P(y)` underflows to 0 (a target neither generated nor in the source).

    Args:
        p_gen, vocab_probs, attention, source_ids, target_ids, from_logits:
            As in `target_probabilities`.
        mask: Optional `(batch, [T])` target mask; False or 0 marks padding.
        epsilon: Added to `P(y)` inside the log.
        reduction: `"mean"` (over the valid target tokens of the batch),
            `"sum"`, or `"none"` (per token `(batch, [T])`, 0 at padding).

    Returns:
        A float32 scalar, or `(batch, [T])` for `"none"`.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> import keras_attn as ka
        >>> p_gen = np.array([[0.5]], "float32")
        >>> vocab_probs = np.full((1, 4), 0.25, "float32")  # vocab_size 4
        >>> attention = np.array([[0.5, 0.5]], "float32")
        >>> source_ids = np.array([[1, 4]], "int32")  # 4: the first OOV slot
        >>> target_ids = np.array([1], "int32")  # P = 0.375
        >>> loss = ka.pointer_generator_nll(
        ...     p_gen, vocab_probs, attention, source_ids, target_ids)
        >>> round(float(loss), 4)
        0.9808
    """
    check_reduction(reduction)
    probs = target_probabilities(
        p_gen, vocab_probs, attention, source_ids, target_ids, from_logits
    )
    return reduce_masked(-ops.log(probs + epsilon), mask, reduction)


__all__ = [
    "PointerGenerator",
    "copy_distribution",
    "mix_target_probabilities",
    "pointer_generator_distribution",
    "pointer_generator_log_distribution",
    "pointer_generator_nll",
    "target_probabilities",
]
