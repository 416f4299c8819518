"""A vocabulary shortlist: a decoding step's distribution over a few words.

A decoding step spends much of its time on the output layer: a product with
the whole `(dim, vocab)` kernel and a log-softmax over every word, for one
token. Production runtimes score a shortlist instead: the `K` most frequent
words and the words of the source (CTranslate2's vocabulary map, Marian's
shortlists). With a vocabulary sorted by decreasing frequency, as
`keras.layers.TextVectorization` and most tokenizers build it, the `K` most
frequent words are the ids below `K`.

The distribution is renormalised over the shortlist, so it is an
approximation: words outside it get probability 0. It is exact for a row
whose full distribution puts no mass outside.
"""

from keras import ops

from keras_attn.copy.distributions import check_copy_inputs, write_source_words
from keras_attn.padding import pad_end

_NEG_INF = float("-inf")


def shortlist_log_distribution(
    shortlist_logits,
    source_logits,
    source_ids,
    vocab_size,
    p_gen=None,
    attention=None,
    num_oov=0,
):
    """Log-probabilities over the vocabulary from a shortlist's logits.

    The vocabulary distribution is the softmax over the shortlist: the ids
    below `K` and the source's words (each counted once). With `p_gen` it is
    mixed with the copy distribution as `pointer_generator_log_distribution`
    mixes the full one.

    Args:
        shortlist_logits: `(batch, K)`: the logits of ids `0 .. K - 1`,
            `K <= vocab_size` static.
        source_logits: `(batch, Tv)`: the logit of each source position's
            word (any value where the word is an OOV).
        source_ids: int `(batch, Tv)`: source words in the extended
            vocabulary (OOVs as `vocab_size + k`, below `vocab_size +
            num_oov`).
        vocab_size: Python int, the vocabulary's size.
        p_gen: `(batch, 1)` (or `(batch,)`) from `PointerGenerator`, or None
            for a model that does not copy.
        attention: `(batch, Tv)` attention weights (zero on padding); needed
            with `p_gen`.
        num_oov: Python int, the OOV slots (with `p_gen`).

    Returns:
        float32 `(batch, vocab_size + num_oov)`, `-inf` outside the shortlist.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn import shortlist_log_distribution
        >>> shortlist_logits = np.zeros((1, 2), "float32")  # ids 0 and 1
        >>> source_logits = np.zeros((1, 1), "float32")
        >>> source_ids = np.array([[5]], "int32")  # a source word off the shortlist
        >>> log_probs = shortlist_log_distribution(
        ...     shortlist_logits, source_logits, source_ids, vocab_size=6)
        >>> np.exp(ops.convert_to_numpy(log_probs), dtype="float64").round(4).tolist()
        [[0.3333, 0.3333, 0.0, 0.0, 0.0, 0.3333]]
    """
    shortlist_logits = ops.cast(shortlist_logits, "float32")
    k = _check_shortlist(shortlist_logits, vocab_size, p_gen, num_oov)
    source_ids = ops.cast(source_ids, "int32")
    in_vocab = source_ids < vocab_size
    source_logits, log_z = _source_logits_and_log_z(
        shortlist_logits, source_logits, source_ids, vocab_size
    )
    generated = shortlist_logits - log_z
    source_log_vocab = ops.where(in_vocab, source_logits - log_z, _NEG_INF)
    if p_gen is None:
        generated = pad_end(generated, vocab_size - k, _NEG_INF)
        # An OOV position writes id 0 its own value: no change.
        source_log_vocab = ops.where(in_vocab, source_log_vocab, generated[:, :1])
        return write_source_words(
            generated, source_log_vocab, ops.where(in_vocab, source_ids, 0), None, None
        )
    # The pointer-generator's checks: p_gen (batch, 1), float32 attention.
    p_gen, attention, source_ids = check_copy_inputs(
        p_gen, shortlist_logits, attention, source_ids
    )
    generated = pad_end(generated + ops.log(p_gen), vocab_size - k + num_oov, _NEG_INF)
    return write_source_words(generated, source_log_vocab, source_ids, p_gen, attention)


def _check_shortlist(shortlist_logits, vocab_size, p_gen, num_oov):
    """Checks the shortlist's arguments and returns its static size `K`.

    Raises:
        ValueError: for a `K` unknown or outside `[1, vocab_size]`, or OOV
            slots without `p_gen`.
    """
    k = shortlist_logits.shape[-1]
    if k is None or not 0 < k <= vocab_size:
        raise ValueError(
            "`shortlist_logits` must have a static last dimension in [1, "
            f"vocab_size={vocab_size}]. Received shortlist_logits shape: "
            f"{tuple(shortlist_logits.shape)}"
        )
    if p_gen is None and num_oov:
        raise ValueError(
            "OOV slots hold copied words: `num_oov` needs `p_gen`. Received: "
            f"num_oov={num_oov}, p_gen=None"
        )
    return k


def _source_logits_and_log_z(shortlist_logits, source_logits, source_ids, vocab_size):
    """Each source position's logit and the shortlist's log-normaliser.

    Args:
        shortlist_logits: float32 `(batch, K)`.
        source_logits: `(batch, Tv)`, as `shortlist_log_distribution` takes it.
        source_ids: int32 `(batch, Tv)`.
        vocab_size: Python int.

    Returns:
        `(source_logits, log_z)`: float32 `(batch, Tv)`, the shortlist's logit
        at a word below `K`, and `(batch, 1)`.
    """
    k = shortlist_logits.shape[-1]
    in_short = source_ids < k
    in_vocab = source_ids < vocab_size
    # A source word below K takes the shortlist's logit; one above counts
    # once in the normaliser, at its first position.
    source_logits = ops.where(
        in_short,
        ops.take_along_axis(shortlist_logits, ops.minimum(source_ids, k - 1), -1),
        ops.cast(source_logits, "float32"),
    )
    positions = ops.arange(ops.shape(source_ids)[1])
    earlier_same = ops.logical_and(
        ops.equal(ops.expand_dims(source_ids, -1), ops.expand_dims(source_ids, 1)),
        ops.expand_dims(positions, -1) > ops.expand_dims(positions, 0),
    )
    counted = in_vocab & ~in_short & ~ops.any(earlier_same, axis=-1)
    log_z = ops.logsumexp(
        ops.concatenate(
            [shortlist_logits, ops.where(counted, source_logits, _NEG_INF)], -1
        ),
        axis=-1,
        keepdims=True,
    )
    return source_logits, log_z
