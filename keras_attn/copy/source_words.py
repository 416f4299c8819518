"""The source words' entries of a pointer-generator's log-probabilities.

One decoding step of a pointer-generator gives, over the extended vocabulary
(`V` words, then `num_oov` slots for the source's unknown words),

    log P(w) = log p_gen + z_w - log Z              w < V, not in the source
             = log(p_gen P_vocab(w) + copy mass)    w a source word
             = -inf                                 an OOV slot no source word holds

with `z` the vocabulary logits and `Z` their partition function. Every word
absent from the source is the logits plus one offset per row; only the `S`
source words need the mixture with the copy distribution
(`source_word_scores`), which is then written over the rest (`write_rows`).
"""

from keras import ops

_NEG_INF = float("-inf")


def write_rows(scores, ids, values):
    """`scores` `(N, V')` with `values[n, i]` written at `(n, ids[n, i])`.

    Duplicate ids must carry the same value: the order of the writes does
    not matter then.
    """
    rows = ops.zeros_like(ids) + ops.expand_dims(
        ops.arange(ops.shape(ids)[0], dtype="int32"), 1
    )
    indices = ops.reshape(ops.stack([rows, ids], axis=-1), (-1, 2))
    return ops.scatter_update(scores, indices, ops.reshape(values, (-1,)))


def source_word_scores(source_generated, source_ids, p_gen, attention):
    """Each source position's word: `log(p_gen P_vocab(w) + copy mass(w))`.

    Args:
        source_generated: float32 `(N, S)`, `log p_gen + log P_vocab` of
            each position's word (`-inf` for an OOV).
        source_ids: int32 `(N, S)`, extended ids.
        p_gen: float32 `(N, 1)`.
        attention: float32 `(N, S)` (zero on padding).

    Returns:
        float32 `(N, S)`; a word's duplicates get the same value, their
        attention summed (an `O(S^2)` comparison per row).
    """
    same_word = ops.equal(
        ops.expand_dims(source_ids, -1), ops.expand_dims(source_ids, 1)
    )
    copied = (1.0 - p_gen) * ops.sum(
        ops.where(same_word, ops.expand_dims(attention, 1), 0.0), axis=-1
    )
    has_copy = copied > 0
    return ops.logaddexp(
        source_generated,
        ops.where(has_copy, ops.log(ops.where(has_copy, copied, 1.0)), _NEG_INF),
    )
