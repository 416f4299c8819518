"""A pointer-generator's next-token scores, left unexpanded for greedy search.

One decoding step of a pointer-generator gives, over the extended vocabulary
(`V` words, then `num_oov` slots for the source's unknown words),

    log P(w) = log p_gen + z_w - log Z              w < V, not in the source
             = log(p_gen P_vocab(w) + copy mass)    w a source word
             = -inf                                 an OOV slot no source word holds

with `z` the vocabulary logits and `Z` their partition function. Written
out, that is a `(N, V + num_oov)` tensor, and a greedy step then passes over
it several times (the processors' bans, the maximum). `PointerScores` keeps
the parts instead: the logits, one offset per row, and the `S` source words'
scores. The best word absent from the source is the one of largest banned
logit (the offset is the same for the whole row), so a greedy choice needs
the partition function and the banned logits' maximum over `(N, V)`, and
the rest over `(N, S)` (`greedy_choice`). `keras_attn.search`'s greedy
search does this when a step returns `PointerScores`; the other strategies
call `dense()`.
"""

from typing import Any, NamedTuple

from keras import ops

from keras_attn.processors import apply_processors

_NEG_INF = float("-inf")
_INT32_MAX = 2**31 - 1


class PointerScores(NamedTuple):
    """A pointer-generator step's log-probabilities, in parts.

    Attributes:
        logits: float32 `(N, V)`, the vocabulary logits.
        offset: float32 `(N, 1)`, `log p_gen - log Z`: a word absent from
            the source scores `logits + offset`.
        source_ids: int32 `(N, S)`, the source words (extended ids, below
            `V + num_oov`).
        source_scores: float32 `(N, S)`, the log-probability of each source
            position's word (the same for a word's duplicates).
        num_oov: Python int, the OOV slots after the vocabulary.
    """

    logits: Any
    offset: Any
    source_ids: Any
    source_scores: Any
    num_oov: int

    def dense(self):
        """float32 `(N, V + num_oov)` log-probabilities, `-inf` on the OOV
        slots that no source word holds."""
        generated = self.logits + self.offset
        if self.num_oov:
            generated = ops.pad(
                generated, [[0, 0], [0, self.num_oov]], constant_values=_NEG_INF
            )
        return write_rows(generated, self.source_ids, self.source_scores)


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


def greedy_choice(scores, processors, history, step):
    """Each row's most probable allowed token, as a dense argmax would pick it.

    Args:
        scores: `PointerScores`.
        processors: the search's processors, each with a `banned` method
            (`keras_attn.processors`): they ban logits and source words alike.
        history, step: as the processors take them.

    Returns:
        `(ids, log_probs)`: int32 `(N,)` tokens, the first (smallest id) of
        each row's maximum, and their float32 `(N,)` log-probabilities.
    """
    logits, ids = scores.logits, scores.source_ids
    source_scores = scores.source_scores
    logits = apply_processors(processors, logits, history, step)
    for processor in processors:
        source_scores = ops.where(
            processor.banned(ids, history, step), _NEG_INF, source_scores
        )
    vocab = ops.shape(logits)[1]
    best_logit = ops.max(logits, axis=1, keepdims=True, initial=_NEG_INF)
    index = ops.arange(vocab, dtype="int32")[None]
    word = ops.min(ops.where(logits == best_logit, index, vocab), axis=1)
    word_score = (best_logit + scores.offset)[:, 0]
    best_source = ops.max(source_scores, axis=1, initial=_NEG_INF)
    source_word = ops.min(
        ops.where(source_scores == best_source[:, None], ids, _INT32_MAX), axis=1
    )
    # The best vocabulary word may be a source word, whose own (larger)
    # score is then among the source's; else the larger score wins, and
    # on a tie the smaller id, as `argmax` takes the first.
    word_in_source = ops.any(ids == word[:, None], axis=1)
    take_source = ops.logical_or(
        best_source > word_score,
        ops.logical_and(
            best_source == word_score,
            ops.logical_or(word_in_source, source_word < word),
        ),
    )
    chosen = ops.where(take_source, source_word, word)
    return chosen, ops.where(take_source, best_source, word_score)
