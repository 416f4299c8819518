"""The vocabulary of a training split: its words, counted and ranked."""

import collections

import tensorflow as tf

from models import text


def count_words(dataset, normalization="gigaword", batch_size=1024):
    """Word counts of the documents and summaries of `dataset`.

    Each batch of pairs is tokenized and its words counted in the graph
    (`tf.unique_with_counts`), several batches at once, so that Python adds
    up one count per distinct word of a batch, not one per token, and only
    the counts are held, never the pairs. A bar shows the pairs counted on a
    terminal.

    Args:
        dataset: `(document, summary)` string pairs.
        normalization: passed to `models.text.tokenize`.
        batch_size: pairs tokenized at once.

    Returns:
        `collections.Counter` of `{word: count}`, words as `str`.
    """
    from tqdm.auto import tqdm

    def batch_counts(documents, summaries):
        tokens = tf.concat(
            [
                text.tokenize(documents, normalization=normalization).flat_values,
                text.tokenize(summaries, normalization=normalization).flat_values,
            ],
            axis=0,
        )
        words, _, counts = tf.unique_with_counts(tokens, out_idx=tf.int64)
        return words, counts, tf.shape(documents)[0]

    batches = (
        dataset.batch(batch_size)
        .map(batch_counts, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )
    total = int(dataset.cardinality())
    raw = collections.Counter()
    with tqdm(
        total=total if total >= 0 else None,
        unit="pair",
        unit_scale=True,
        desc="Counting words",
        disable=None,  # no bar unless on a terminal
        leave=False,
    ) as bar:
        for words, counts, pairs in batches.as_numpy_iterator():
            raw.update(dict(zip(words.tolist(), counts.tolist(), strict=True)))
            bar.update(int(pairs))
    return collections.Counter({w.decode("utf-8"): c for w, c in raw.items()})


def split_vocabulary(train_dataset, max_size, min_count=2, normalization="gigaword"):
    """The words of `train_dataset`, the reserved tokens first, at most
    `max_size` (`models.text.build_vocabulary`)."""
    counts = count_words(train_dataset, normalization=normalization)
    return text.build_vocabulary(counts, max_size=max_size, min_count=min_count)
