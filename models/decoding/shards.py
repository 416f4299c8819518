"""A batch searched as several independent searches that run at the same time."""

import tensorflow as tf


def in_shards(search_slices, shards):
    """`search_slices(list of documents)` on `shards` slices of the batch.

    A search is a loop of small ops, each waiting for the last, which can
    leave a core idle (XLA's code runs a cluster's small ops on one thread);
    TensorFlow runs independent ops at the same time, so one search per
    slice fills it, and one slice's text can be read or written while the
    other's search runs. Rows are decoded independently, so the headlines
    are the same. A batch of fewer rows than `shards` is searched whole.
    """

    def sharded(documents):
        if shards == 1:
            return search_slices([documents])
        rows = tf.shape(documents)[0]

        def apart():
            # Slice sizes differ by one at most, and none is empty.
            bounds = [i * rows // shards for i in range(shards + 1)]
            return search_slices(
                [
                    documents[begin:end]
                    for begin, end in zip(bounds[:-1], bounds[1:], strict=True)
                ]
            )

        return tf.cond(rows >= shards, apart, lambda: search_slices([documents]))

    return sharded


def concat_padded(parts):
    """`parts` `[rows_i, ...]` concatenated on rows, each padded at the end of
    its other axes to the largest (with "" or 0, as the search pads)."""
    if len(parts) == 1:
        return parts[0]
    sizes = tf.reduce_max(tf.stack([tf.shape(part) for part in parts]), axis=0)
    padded = []
    for part in parts:
        room = sizes - tf.shape(part)
        padding = tf.stack([tf.zeros_like(room), room], axis=1)[1:]
        padding = tf.concat([[[0, 0]], padding], axis=0)
        padded.append(tf.pad(part, padding))
    return tf.concat(padded, axis=0)
