"""Decoding many documents batch by batch: the one loop for every decoder.

Validation and tuning decode with a `HeadlineModule`'s search, evaluation
with a SavedModel's signature; both walk the documents here. TensorFlow is
imported when a search runs, so that the evaluator's command line answers
`--help` without it.
"""

import numpy as np
from tqdm.auto import tqdm


def decode_in_batches(decode, documents, batch_size, progress=False, desc=None):
    """`decode(batch of documents) -> list of str` over `documents`, in order.

    Args:
        decode: Takes a list of at most `batch_size` documents.
        documents: The documents (str or bytes).
        batch_size: Documents per call of `decode`.
        progress: Whether to show a progress bar.
        desc: The progress bar's label.

    Returns:
        The headlines, one per document.
    """
    documents = list(documents)
    headlines = []
    with tqdm(total=len(documents), desc=desc, unit="doc", disable=not progress) as bar:
        for start in range(0, len(documents), batch_size):
            batch = documents[start : start + batch_size]
            headlines.extend(decode(batch))
            bar.update(len(batch))
    return headlines


def strings(tensor):
    """A tf.string tensor (any rank) as nested lists of Python `str`."""
    array = np.asarray(tensor.numpy(), dtype=object)
    return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(array).tolist()


def headlines_in_batches(search, documents, batch_size=128):
    """`search(tf.string [n]) -> tf.string [n]` over `documents`, as str.

    For ROUGE, `search` returns a `HeadlineModule`'s `normalized_headlines`.
    """
    import tensorflow as tf

    return decode_in_batches(
        lambda batch: strings(search(tf.constant(batch, tf.string))),
        documents,
        batch_size,
    )
