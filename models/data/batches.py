"""Encoded examples to shuffled, length-bucketed, padded batches."""

import tensorflow as tf

# Examples mixed at a time.
SHUFFLE_BUFFER = 10_000


def _default_length(*features):
    first = tf.nest.flatten(features)[0]
    return tf.shape(first, out_type=tf.int32)[0]


def make_batches(
    dataset,
    encode_fn=None,
    batch_size=64,
    *,
    length_fn=None,
    bucket_boundaries=(16, 24, 32, 48, 64),
    shuffle=True,
    seed=None,
    reshuffle=True,
    cache=True,
):
    """Encodes, caches, shuffles, buckets by length, pads and prefetches.

    Order: `map(encode_fn)` (if given) -> `cache` -> `shuffle` (reshuffled
    each time the dataset is read, unless `reshuffle` is False) ->
    `bucket_by_sequence_length` -> `prefetch(AUTOTUNE)`. Caching after
    encoding means the encoding runs once, not once per pass.

    Args:
        dataset: elements `(document, summary)` (or anything `encode_fn`
            accepts as positional arguments).
        encode_fn: maps one element to model features: tensors or a nested
            structure of tensors with a leading time axis (e.g.
            `({"source": ids[S], "target_in": ids[T]}, ids[T])`). Runs in-graph
            under `Dataset.map`. `None`: the elements are already encoded.
        batch_size: examples per batch, in every bucket.
        length_fn: maps the encoded features (as `encode_fn` returned them,
            unpacked if a tuple) to an `int32` scalar used for bucketing.
            Default: the length of the first dimension of the first flattened
            feature.
        bucket_boundaries: increasing upper length bounds (exclusive) of the
            buckets; `len(bucket_boundaries) + 1` buckets. Every axis is padded
            to the longest in its batch (with 0 or b"").
        shuffle: shuffle examples (files are read in order).
        seed: shuffle seed, for reproducible order.
        reshuffle: a new order each time the dataset is iterated (False:
            the same order every time, as `seed` sets it).
        cache: cache the encoded examples in memory.

    Returns:
        `tf.data.Dataset` of padded batches.
    """
    boundaries = [int(b) for b in bucket_boundaries]
    if (
        not boundaries
        or any(b <= 0 for b in boundaries)
        or sorted(set(boundaries)) != boundaries
    ):
        raise ValueError(
            "`bucket_boundaries` must be strictly increasing positive ints. "
            f"Received: bucket_boundaries={tuple(bucket_boundaries)}"
        )
    if batch_size < 1:
        raise ValueError(
            f"`batch_size` must be >= 1. Received: batch_size={batch_size}"
        )
    ds = dataset
    if encode_fn is not None:
        ds = ds.map(lambda *args: encode_fn(*args), num_parallel_calls=tf.data.AUTOTUNE)
    if cache:
        ds = ds.cache()
    if shuffle:
        ds = ds.shuffle(SHUFFLE_BUFFER, seed=seed, reshuffle_each_iteration=reshuffle)
    ds = ds.bucket_by_sequence_length(
        element_length_func=length_fn or _default_length,
        bucket_boundaries=boundaries,
        bucket_batch_sizes=[batch_size] * (len(boundaries) + 1),
    )
    return ds.prefetch(tf.data.AUTOTUNE)
