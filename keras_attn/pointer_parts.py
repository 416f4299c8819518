"""A pointer-generator's next-token scores, left in parts (`PointerScores`).

One decoding step of a pointer-generator gives, over the extended vocabulary
(`V` words, then `num_oov` slots for the source's unknown words),

    log P(w) = log p_gen + z_w - log Z              w < V, not in the source
             = log(p_gen P_vocab(w) + copy mass)    w a source word
             = -inf                                 an OOV slot no source word holds

with `z` the vocabulary logits and `Z` their partition function. Written
out, that is a `(N, V + num_oov)` tensor, and a greedy step then passes over
it several times (the processors' bans, the maximum). `PointerScores` keeps
the parts instead: the logits, one offset per row, and the `S` source words'
scores. The best word absent from the source is the one of largest allowed
logit (the offset is the same for the whole row), so a greedy choice needs
the banned logits' maximum over `(N, V)`, and the rest over `(N, S)`
(`PointerScores.argmax`, the `keras_attn.TokenScores` protocol). Beam and
sampling search write the scores out (`log_probs()`).
"""

from keras import ops

from keras_attn.processors import IdShift, TokenBan, apply_processors, shift_amounts
from keras_attn.token_scores import TokenScores, argmax_first

_NEG_INF = float("-inf")


class PointerScores(TokenScores):
    """A pointer-generator step's log-probabilities, in parts.

    Built by `keras_attn.pointer_scores`.

    Args:
        logits: float32 `(N, V)`, the vocabulary logits.
        offset: float32 `(N, 1)`, `log p_gen - log Z`: a word absent from
            the source scores `logits + offset`.
        source_ids: int32 `(N, S)`, the source words (extended ids, below
            `V + num_oov`).
        source_scores: float32 `(N, S)`, the log-probability of each source
            position's word (the same for a word's duplicates).
        num_oov: Python int, the OOV slots after the vocabulary.
    """

    def __init__(self, logits, offset, source_ids, source_scores, num_oov):
        self.logits = logits
        self.offset = offset
        self.source_ids = source_ids
        self.source_scores = source_scores
        self.num_oov = num_oov

    def log_probs(self):
        """float32 `(N, V + num_oov)` log-probabilities, `-inf` on the OOV
        slots that no source word holds."""
        generated = self.logits + self.offset
        if self.num_oov:
            generated = ops.pad(
                generated, [[0, 0], [0, self.num_oov]], constant_values=_NEG_INF
            )
        return write_rows(generated, self.source_ids, self.source_scores)

    def dense(self):
        """The same as `log_probs()`."""
        return self.log_probs()

    def argmax(self, processors, history, step, running):
        """`TokenScores.argmax` from the parts, when every processor is a
        `TokenBan` (it bans logits and source words alike) or an `IdShift`
        (it lowers a few ids, which are then scored apart); else from the
        scores written out."""
        if not all(isinstance(p, (TokenBan, IdShift)) for p in processors):
            return super().argmax(processors, history, step, running)
        ids, log_probs = self._best(processors, history, step)
        return ids, running + log_probs

    def _best(self, processors, history, step):
        """`(ids, log_probs)`: int32 `(N,)`, the first (smallest id) of each
        row's most probable allowed tokens, and their float32 `(N,)` scores."""
        ids = self.source_ids
        bans = [p for p in processors if isinstance(p, TokenBan)]
        logits = apply_processors(bans, self.logits, history, step)
        source_scores = self.source_scores
        for processor in bans:
            source_scores = ops.where(
                processor.banned(ids, history, step), _NEG_INF, source_scores
            )
        rows = ops.shape(logits)[0]
        shifts = [
            p.shifts(history, step, rows) for p in processors if isinstance(p, IdShift)
        ]
        if shifts:
            word, word_score = self._best_generated(logits, shifts)
            for shifted_ids, amounts in shifts:
                source_scores = source_scores - shift_amounts(
                    ids, shifted_ids, amounts, source_scores.dtype
                )
        else:
            best_logit, word = argmax_first(logits)
            word_score = (best_logit + self.offset)[:, 0]
        best_source, source_word = argmax_first(source_scores, ids)
        best_source = best_source[:, 0]
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

    def _best_generated(self, logits, shifts):
        """The best generated word (`(N,)` id and score) under the `IdShift`s'
        `shifts`: the shifted ids are scored apart, as the dense scores are
        (`logits + offset`, then each shift in turn), the rest by their
        largest logit."""
        vocab = ops.shape(logits)[1]
        shifted = ops.concatenate([ops.cast(i, "int32") for i, _ in shifts], axis=1)
        in_vocab = shifted < vocab
        at = ops.minimum(ops.maximum(shifted, 0), vocab - 1)
        generated = ops.take_along_axis(logits, at, axis=1) + self.offset
        # An OOV slot's generated score is -inf, as `log_probs()` pads it.
        generated = ops.where(in_vocab, generated, _NEG_INF)
        for shifted_ids, amounts in shifts:
            generated = generated - shift_amounts(
                shifted, shifted_ids, amounts, generated.dtype
            )
        columns = ops.arange(vocab, dtype="int32")[None]
        is_shifted = ops.any(
            ops.expand_dims(columns, -1) == ops.expand_dims(shifted, 1), axis=-1
        )
        best_logit, word = argmax_first(ops.where(is_shifted, _NEG_INF, logits))
        scores = ops.concatenate([best_logit + self.offset, generated], axis=1)
        candidates = ops.concatenate([word[:, None], shifted], axis=1)
        best, word = argmax_first(scores, candidates)
        return word, best[:, 0]


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
