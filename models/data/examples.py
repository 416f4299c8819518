"""`(document, summary)` pairs to the model's training examples and batches."""

import tensorflow as tf

from models.data.batches import make_batches


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
    return (
        dataset.batch(1024)
        .map(encode, num_parallel_calls=tf.data.AUTOTUNE)
        .unbatch()
        .map(_unpad_example)
    )


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
        length_fn=lambda inputs, target: tf.shape(inputs["source_ids"])[0],
        shuffle=training,
        seed=seed,
    )
