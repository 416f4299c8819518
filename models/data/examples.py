"""`(document, summary)` pairs to the model's training examples and batches."""

import shutil
import sys
from pathlib import Path

import tensorflow as tf

from models.data.batches import make_batches
from models.folder_layout import TRAINING_CACHE

# Training examples above which they are kept on disk (`training_cache`): a
# million examples take about 2 GB of memory as tensors.
MEMORY_CACHE_EXAMPLES = 500_000


def encode_dataset(dataset, features):
    """`(document, summary)` strings to `(inputs, target_out)` examples.

    `features`: the run's `models.text_features.TextFeatures`.
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
    """Where `epoch_batches` keeps `encoded`: in memory, or for a large split
    in a folder of the run folder `folder`.

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


def _saved(encoded, path):
    """`encoded`, written once to the folder `path` and read from there."""
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


def batched(encoded, batch_size, *, training, seed=0):
    """Length-bucketed, cached, shuffled (`training`), prefetched batches."""
    return make_batches(
        encoded,
        batch_size=batch_size,
        length_fn=_source_length,
        shuffle=training,
        seed=seed,
    )


def _source_length(inputs, target):
    return tf.shape(inputs["source_ids"])[0]


def epoch_batches(
    encoded, batch_size, *, seed, epochs, steps_per_epoch=None, cache_file=None
):
    """Training batches of `epochs` (a `range`), each epoch shuffled by its
    own seed, one after another; and the steps of one epoch.

    Epoch `e` is the same whether it follows epoch `e - 1` in one process or
    starts a resumed run: the shuffle of each epoch is seeded by `(seed, e)`
    alone, never by how many epochs this process has iterated. Every epoch
    has the same number of batches whatever its order (each length bucket
    gives `ceil(examples / batch_size)` of them), counted once.

    Args:
        encoded: the training examples (`encode_dataset`), cached here.
        batch_size: examples per batch.
        seed: the run's seed.
        epochs: the epochs to cover, e.g. `range(initial_epoch, 60)`.
        steps_per_epoch: batches an epoch (None: a pass over the data; more
            than a pass goes on into the same order again).
        cache_file: the folder the examples are saved in and read from, a
            pass at a time (`training_cache`; None: cached in memory). The
            order and the batches are the same either way.

    Returns:
        `(dataset, steps_per_epoch)`.
    """
    cached = _saved(encoded, cache_file) if cache_file else encoded.cache()

    def one_epoch(epoch):
        return make_batches(
            cached,
            batch_size=batch_size,
            length_fn=_source_length,
            seed=_epoch_seed(seed, epoch),
            reshuffle=False,
            cache=False,
        )

    if steps_per_epoch is None:
        steps_per_epoch = int(one_epoch(0).reduce(0, lambda count, _: count + 1))
    epochs = list(epochs)
    if not epochs:
        raise ValueError(f"`epochs` must not be empty. Received: epochs={epochs}")
    parts = [one_epoch(e).repeat().take(steps_per_epoch) for e in epochs]
    dataset = parts[0]
    for part in parts[1:]:
        dataset = dataset.concatenate(part)
    return dataset.prefetch(tf.data.AUTOTUNE), steps_per_epoch


def _epoch_seed(seed, epoch):
    # Distinct for every (seed, epoch) pair a run can meet, and in int64.
    return (int(seed) * 100_003 + int(epoch)) % (2**31 - 1)
