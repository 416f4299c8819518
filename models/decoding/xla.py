"""XLA for the exported search: one compilation per padded shape."""

import tensorflow as tf

from keras_attn.search.strategies import DecodingResult
from models.text.features import PAD_ID

# The source lengths XLA compiles for are multiples of this.
XLA_SOURCE_STEP = 16


def padded_for_xla(decode):
    """`decode(ids, ext_ids, *args)`, compiled by XLA, on padded shapes.

    The encoder is compiled too, with the search: XLA then fuses its steps
    as well, rather than leaving them to TensorFlow's executor.

    XLA compiles once per input shape: the batch is padded to a power of two
    and the source to a multiple of `XLA_SOURCE_STEP`, so that a server
    compiles a few shapes, not one per request. The source's padding ids are
    masked out; the added rows are copies of the batch's own rows, which end
    with them (empty sources could run the loop to `max_length`).
    """
    compiled = tf.function(decode, jit_compile=True, autograph=False)

    def padded(ids, ext_ids, *args):
        rows, length = tf.shape(ids)[0], tf.shape(ids)[1]
        (power,) = tf.while_loop(lambda n: n < rows, lambda n: (2 * n,), [1])
        copies = tf.range(power) % tf.maximum(rows, 1)
        padding = [[0, tf.maximum(1 - rows, 0)], [0, -length % XLA_SOURCE_STEP]]

        def pad(x):
            return tf.gather(tf.pad(x, padding, constant_values=PAD_ID), copies)

        result = compiled(pad(ids), pad(ext_ids), *args)
        return DecodingResult(
            ids=result.ids[:rows],
            lengths=result.lengths[:rows],
            scores=result.scores[:rows],
            log_probs=result.log_probs[:rows],
            extras=result.extras[:rows, :, :length],
        )

    return padded
