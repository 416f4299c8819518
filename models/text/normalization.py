"""Normalization: the tokens in the data's form, lowercased, digits masked.

The Gigaword pairs (Rush et al., 2015) are lowercased, PTB-tokenized, and have
every digit replaced by `#`:

    Japan's NEC Corp. said on Wednesday it would cut 2,500 jobs.
    japan 's nec corp. said on wednesday it would cut #,### jobs .

`normalize` turns raw text into that form in-graph: `fold(surface_words(x))`.
The `"general"` form keeps the digits (`models.settings.model.NORMALIZATION_CHOICES`).
"""

import tensorflow as tf

from models.settings.model import check_normalization
from models.text.tokenizing import MAX_CHARS, surface_words


def normalize(texts, max_chars=MAX_CHARS, normalization="gigaword"):
    """Normalizes raw text into the Gigaword token form, in-graph.

    PTB-tokenizes (`'s`, `n't`, commas, quotes as ``` `` ``` / `''`, brackets
    as `-lrb-` / `-rrb-`, sentence-final periods, but keeps abbreviations such
    as `corp.` and `u.s.`), escapes `&` and `/` as the data does, removes
    control characters and collapses whitespace (`surface`); then lowercases
    (Unicode-aware) and replaces digits by `#` (`"gigaword"` only: the
    `"general"` form keeps them) (`fold`). A standalone `UNK` becomes
    `<unk>`. Text that is already in the data's form comes back unchanged.

    Example:

    >>> normalize("Japan's NEC Corp. said on Wednesday it would cut 2,500 jobs.")
    <tf.Tensor: ... b"japan 's nec corp. said on wednesday it would cut #,### jobs .">

    Args:
        texts: `tf.string` tensor (or str / list of str) of any shape.
        max_chars: texts are cut to their first `max_chars` Unicode characters
            before any regex runs, so the cost per text is bounded.
        normalization: `"gigaword"` or `"general"` (digits kept).

    Returns:
        `tf.string` tensor of the same shape, tokens separated by one space.
    """
    texts = tf.convert_to_tensor(texts, dtype=tf.string)
    tokens = tokenize(texts, max_chars=max_chars, normalization=normalization)
    joined = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
    if isinstance(joined, tf.RaggedTensor):  # texts of rank 2 or more
        joined = joined.to_tensor(shape=tf.shape(texts))
    return joined


def tokenize(
    texts,
    max_tokens=None,
    max_chars=MAX_CHARS,
    normalization="gigaword",
):
    """Normalizes texts and splits them into word tokens, in-graph.

    `fold(surface_words(texts))`: the i-th token is the i-th surface word,
    folded.

    Args:
        texts: `tf.string` tensor of shape `(batch,)` (or a scalar).
        max_tokens: keep at most this many tokens per text (`None`: all).
        max_chars: passed to `surface`.
        normalization: passed to `fold`.

    Returns:
        `tf.RaggedTensor` of shape `(batch, None)` of `tf.string` tokens, or a
        1-D `tf.string` tensor for a scalar input.
    """
    check_normalization(normalization)
    return fold(surface_words(texts, max_tokens, max_chars), normalization)


def fold(tokens, normalization="gigaword"):
    """Surface tokens to normalized ones: lowercased, digits `#` (gigaword).

    `tokens`: a `tf.string` tensor or `tf.RaggedTensor`, of the same kind out.
    """
    check_normalization(normalization)
    if isinstance(tokens, tf.RaggedTensor):
        return tf.ragged.map_flat_values(fold, tokens, normalization)
    tokens = tf.strings.lower(tokens, encoding="utf-8")
    if normalization == "gigaword":
        tokens = tf.strings.regex_replace(tokens, r"\p{Nd}", "#")
    return tokens


def guess_normalization(texts):
    """`"gigaword"` for text already in Gigaword's form, else `"general"`.

    Gigaword's text has no digit (they are `#`) and no capital letter but in
    its `UNK` markers: any other digit or capital means text of another kind.
    """
    for line in texts:
        line = line.replace("UNK", "")
        if any(c.isdigit() or c.isupper() for c in line):
            return "general"
    return "gigaword"
