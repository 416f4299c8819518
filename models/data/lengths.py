"""The token lengths of a split's pairs, measured on a bounded sample."""

import numpy as np

from models import text
from models.text import cjk


def measure_lengths(split, normalization, sample, batch_size=1024):
    """The lengths of the first `sample` pairs of `split`, streamed.

    Sources are counted in the words the model reads (`text.surface_words`,
    one per Chinese or Japanese character), headlines in the tokens it
    learns (`text.tokenize`), and headlines again in the lead baseline's
    words (`models.text.cjk.word_count`). Only the lengths are kept, never the
    pairs: one batch of text at a time.

    Args:
        split: `(document, summary)` string pairs, a `tf.data.Dataset`.
        normalization: the text form of the vocabulary
            (`models.text.normalize`).
        sample: the most pairs read, at least 1.
        batch_size: pairs tokenized together.

    Returns:
        `(source, target, reference)`: int arrays of shape `[n]`, `n <=
        sample`: the source tokens, the headline tokens (without `</s>`) and
        the headline's words in the lead baseline's units.
    """
    if sample < 1:
        raise ValueError(f"`sample` must be >= 1. Received: sample={sample}")

    def lengths(documents, summaries):
        source = text.surface_words(documents).row_lengths()
        target = text.tokenize(summaries, normalization=normalization).row_lengths()
        return source, target, summaries

    source, target, reference = [], [], []
    batches = split.take(sample).batch(batch_size).map(lengths)
    for s, t, summaries in batches.as_numpy_iterator():
        source.append(s)
        target.append(t)
        reference.append([cjk.word_count(x.decode("utf-8")) for x in summaries])
    if not source:
        return (np.zeros([0], np.int64),) * 3
    return (
        np.concatenate(source),
        np.concatenate(target),
        np.concatenate(reference).astype(np.int64),
    )
