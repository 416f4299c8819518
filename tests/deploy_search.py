"""A small attention decoder and its searches as `tf.function`s, and their
conversions to ONNX (tf2onnx), LiteRT (builtin ops) and OpenVINO.

The decoder: `Embedding`, `AttentionCellWrapper(GRUCell, BahdanauAttention,
style="bahdanau")`, a `Dense` projection; the memory carries padding. The
converters are the worked example's (examples/deploy_beam_search.py).
"""

import numpy as np

from examples.deploy_beam_search import by_role, to_litert, to_onnx

__all__ = [
    "by_role",
    "decoding",
    "example_inputs",
    "make_decoder",
    "signature",
    "to_litert",
    "to_onnx",
]

VOCAB, EMBED, UNITS, SOURCE_LENGTH = 11, 6, 8, 5
START, END, MAX_LENGTH, BEAM_SIZE = 2, 1, 7, 3


def make_decoder(seed=0):
    """`(step, initial_state)` of a small attention decoder.

    `step(ids, state)` is the search's one-token step; `initial_state(memory,
    memory_mask)` the cell's states over a memory `(B, SOURCE_LENGTH, UNITS)`.
    """
    import keras
    from keras import ops

    import keras_attn as ka

    keras.utils.set_random_seed(seed)
    embedding = keras.layers.Embedding(VOCAB, EMBED)
    cell = ka.AttentionCellWrapper(
        keras.layers.GRUCell(UNITS), ka.BahdanauAttention(UNITS), style="bahdanau"
    )
    cell.build((None, EMBED))
    projection = keras.layers.Dense(VOCAB)

    def step(ids, state):
        outputs, state = cell(embedding(ids), list(state))
        return ops.log_softmax(projection(outputs)), state

    def initial_state(memory, memory_mask):
        return cell.get_initial_state_with_memory(memory, memory_mask)

    memory, memory_mask = example_inputs(1)
    step(np.full((1,), START, "int32"), initial_state(memory, memory_mask))
    return step, initial_state


def example_inputs(batch=3, seed=0):
    """A memory `(batch, SOURCE_LENGTH, UNITS)` and its mask, with padding."""
    rng = np.random.default_rng(seed)
    memory = rng.normal(size=(batch, SOURCE_LENGTH, UNITS)).astype("float32")
    lengths = np.maximum(SOURCE_LENGTH - 2 * np.arange(batch), 1)
    memory_mask = np.arange(SOURCE_LENGTH)[None] < lengths[:, None]
    return memory, memory_mask


def decoding(strategy, step, initial_state):
    """`decode(memory, memory_mask) -> {"ids", "lengths", "scores"}` by
    `strategy` ("greedy", "beam" or "sampling")."""
    from keras import ops

    import keras_attn as ka

    def decode(memory, memory_mask):
        state = initial_state(memory, memory_mask)
        start_ids = ops.full((ops.shape(memory)[0],), START, "int32")
        args = (step, state, start_ids, END, MAX_LENGTH)
        if strategy == "greedy":
            result = ka.greedy_search(*args)
        elif strategy == "beam":
            result = ka.beam_search(
                *args,
                BEAM_SIZE,
                length_penalty=0.6,
                min_length=2,
                no_repeat_ngram_size=2,
            )
        else:
            result = ka.sampling_search(*args, top_k=4, seed=3)
        return {"ids": result.ids, "lengths": result.lengths, "scores": result.scores}

    return decode


def signature(batch=None):
    """The `tf.function` input signature of `decoding`'s functions."""
    import tensorflow as tf

    return [
        tf.TensorSpec((batch, SOURCE_LENGTH, UNITS), tf.float32, name="memory"),
        tf.TensorSpec((batch, SOURCE_LENGTH), tf.bool, name="memory_mask"),
    ]
