"""`(document, summary)` pairs to the model's training examples and batches."""

import shutil
import sys
from pathlib import Path

import tensorflow as tf

from models.data.arrays import source_buckets
from models.data.batches import SHUFFLE_BUFFER, make_batches
from models.settings.folder_layout import TRAINING_CACHE

# Training examples above which they are kept on disk (`cached_examples`): a
# million examples take about 2 GB of memory as tensors.
MEMORY_CACHE_EXAMPLES = 500_000


def encode_dataset(dataset, features):
    """`(document, summary)` strings to `(inputs, target_out)` examples.

    `features`: the run's `models.text.features.TextFeatures`.
    """

    def encode(documents, summaries):
        source = features.encode_source(documents)
        target = features.encode_target(summaries, source)
        inputs = {
            "source_ids": source["ids"],
            "source_ext_ids": source["ext_ids"],
            "target_in": target["target_in"],
        }
        return inputs, target["target_out"]

    # Encoding a thousand at a time is far cheaper than one by one; the
    # examples are then unbatched and re-batched by length.
    encoded = (
        dataset.batch(1024)
        .map(encode, num_parallel_calls=tf.data.AUTOTUNE)
        .unbatch()
        .map(_unpad_example)
    )
    # One example a pair: the pairs' count, when known, is the examples'
    # (`unbatch` forgets it), which `training_cache` reads.
    pairs = int(dataset.cardinality())
    if pairs >= 0:
        encoded = encoded.apply(tf.data.experimental.assert_cardinality(pairs))
    return encoded


def training_cache(encoded, folder):
    """Where `cached_examples` keeps `encoded`: in memory, or for a large
    split in a folder of the run folder `folder`.

    In memory (`Dataset.cache`) an encoded example takes about 2 KB, its four
    tensors and their bookkeeping against some 300 bytes of ids: over 7 GB
    for the full Gigaword. A file cache (`Dataset.cache(filename)`) holds an
    index entry for each tensor in memory while it writes, about as much.
    `Dataset.save` streams to disk instead, about 360 bytes an example. The
    folder is named by the example count, so that a run resumed with another
    `--max-train-examples` encodes its own.

    Args:
        encoded: the training examples (`encode_dataset`).
        folder: the run folder.

    Returns:
        `None` (memory) for at most `MEMORY_CACHE_EXAMPLES` examples or an
        unknown count, else the path of the saved examples' folder, a `str`.
    """
    examples = int(encoded.cardinality())
    if examples < 0 or examples <= MEMORY_CACHE_EXAMPLES:
        return None
    return str(Path(folder) / f"{TRAINING_CACHE}-{examples}")


def cached_examples(encoded, folder):
    """`encoded`, read once: cached in memory, or for a large split
    (`training_cache`) written once into the run folder `folder` and read
    from there. The order, and so the batches, are the same either way."""
    path = training_cache(encoded, folder)
    if path is None:
        return encoded.cache()
    path = Path(path)
    if not path.is_dir():
        # Written aside and renamed when whole: a killed pass leaves no
        # folder that looks finished, and the next run writes it again.
        partial = path.with_name(path.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        print(
            f"Encoding the {int(encoded.cardinality()):,} training examples "
            f"once, into {path}",
            file=sys.stderr,
            flush=True,
        )
        # One shard: read back in the order written, so the batches are the
        # ones the memory cache gives.
        encoded.save(str(partial), shard_func=lambda *_: tf.constant(0, tf.int64))
        partial.rename(path)
    return tf.data.Dataset.load(str(path), element_spec=encoded.element_spec)


def _unpad_example(inputs, target_out):
    # Rows come out of the batched encoding padded to the longest of 1024:
    # cut each back to its own length, so that batches pad only to theirs.
    source_length = tf.maximum(
        1, tf.reduce_sum(tf.cast(inputs["source_ids"] != 0, tf.int32))
    )
    target_length = tf.reduce_sum(tf.cast(target_out != 0, tf.int32))
    inputs = {
        "source_ids": inputs["source_ids"][:source_length],
        "source_ext_ids": inputs["source_ext_ids"][:source_length],
        "target_in": inputs["target_in"][:target_length],
    }
    return inputs, target_out[:target_length]


def batched(encoded, batch_size, *, training, max_source_length, seed=0, cache=True):
    """Length-bucketed (`source_buckets`), shuffled (`training`), prefetched
    batches; `encoded` cached in memory unless `cache` is False (examples
    already read once, `cached_examples`)."""
    return make_batches(
        encoded,
        batch_size=batch_size,
        length_fn=_source_length,
        bucket_boundaries=source_buckets(max_source_length),
        shuffle=training,
        seed=seed,
        cache=cache,
    )


def _source_length(inputs, target):
    return tf.shape(inputs["source_ids"])[0]


def pass_batches(cached, batch_size, *, seed, index, max_source_length):
    """Pass `index` (from 0) over the cached training examples: shuffled by
    `(seed, index)` alone, bucketed by length and batched.

    The pass is the same whichever passes came before it in this process,
    so that a resumed run reads what a run never cut reads. Every pass has
    the same number of batches whatever its order (each length bucket gives
    `ceil(examples / batch_size)` of them): `count_batches` of one is the
    schedule's `pass_batches`.
    """
    return make_batches(
        cached,
        batch_size=batch_size,
        length_fn=_source_length,
        bucket_boundaries=source_buckets(max_source_length),
        seed=_pass_seed(seed, index),
        reshuffle=False,
        cache=False,
    )


def count_batches(dataset):
    """The number of elements of `dataset`, read once."""
    return int(dataset.reduce(0, lambda count, _: count + 1))


def stream_batches(cached, batch_size, *, seed, max_source_length, start=(0, 0)):
    """The training stream: the passes (`pass_batches`) one after another,
    without end, from batch `start[1]` of pass `start[0]`.

    Batch `b` of pass `p` is the same whether the stream starts at pass 0 or
    at `(p, b)`, where `models.training.schedule.Schedule.start` resumes a run: in
    the middle of a pass too.

    Args:
        cached: the training examples (`encode_dataset`), cached
            (`cached_examples`): every pass reads the same cache.
        batch_size: examples per batch.
        seed: the run's seed.
        max_source_length: where the sources are cut (`source_buckets`).
        start: `(pass, batch)`: the first pass, and the batches of it to skip.

    Returns:
        A `tf.data.Dataset` of training batches.
    """
    first, skip = (int(v) for v in start)
    graph_seed = tf.compat.v1.random.get_seed(0)[0]

    def one_pass(index):
        return make_batches(
            _shuffled(cached, graph_seed, _pass_seed(seed, index)),
            batch_size=batch_size,
            length_fn=_source_length,
            bucket_boundaries=source_buckets(max_source_length),
            shuffle=False,
            cache=False,
        )

    passes = tf.data.Dataset.range(first, 2**62).flat_map(one_pass)
    return passes.skip(skip).prefetch(tf.data.AUTOTUNE)


def _shuffled(dataset, graph_seed, op_seed):
    """`dataset.shuffle(SHUFFLE_BUFFER, seed=op_seed, reshuffle_each_iteration=
    False)` for an `op_seed` computed in the graph, in the same order.

    `Dataset.shuffle` takes a tensor seed only where the graph-level seed is
    not 0 (its check for the seeds `(0, 0)` is in Python); the op it makes is
    called here with the seeds it would pass, `(graph_seed, op_seed)`, and
    `(0, 2**31 - 1)` in place of `(0, 0)`.
    """
    op_seed = tf.cast(op_seed, tf.int64) % _MAX_SEED
    seed2 = tf.where(
        (graph_seed == 0) & (op_seed == 0), tf.constant(_MAX_SEED, tf.int64), op_seed
    )
    flat = tf.nest.flatten(dataset.element_spec)
    variant = tf.raw_ops.ShuffleDatasetV3(
        input_dataset=tf.data.experimental.to_variant(dataset),
        buffer_size=tf.constant(SHUFFLE_BUFFER, tf.int64),
        seed=tf.constant(graph_seed, tf.int64),
        seed2=seed2,
        seed_generator=tf.raw_ops.DummySeedGenerator(),
        output_types=[spec.dtype for spec in flat],
        output_shapes=[spec.shape for spec in flat],
        reshuffle_each_iteration=False,
    )
    return tf.data.experimental.from_variant(variant, dataset.element_spec)


_MAX_SEED = 2**31 - 1


def _pass_seed(seed, index):
    # Distinct for every (seed, pass) pair a run can meet, and in int64;
    # `index` may be a tensor.
    return (seed * 100_003 + index) % _MAX_SEED
