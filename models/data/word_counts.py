"""The vocabulary of a training split: its words, counted and ranked."""

import collections

from models import text


def count_words(dataset, normalization="gigaword", batch_size=1024):
    """Word counts of the documents and summaries of `dataset`."""
    counts = collections.Counter()
    for documents, summaries in dataset.batch(batch_size):
        for column in (documents, summaries):
            tokens = text.tokenize(column, normalization=normalization)
            for row in tokens.to_list():
                counts.update(w.decode("utf-8") for w in row)
    return counts


def split_vocabulary(train_dataset, max_size, min_count=2, normalization="gigaword"):
    """The words of `train_dataset`, the reserved tokens first, at most
    `max_size` (`models.text.build_vocabulary`)."""
    counts = count_words(train_dataset, normalization=normalization)
    return text.build_vocabulary(counts, max_size=max_size, min_count=min_count)
