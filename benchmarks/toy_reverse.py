"""The toy of the decoder's tests and of `bench_generate`: reverse a sequence.

A GRU encoder and a `BahdanauAttentionCell` decoder, composed as a
`keras_attn.Seq2SeqModel`, learn to write a source of 3 to 6 tokens
backwards. `hand_written_search` decodes it the way it was done before
`generate`: a second encoder model and a `step` over kept handles to the
cell, the target embedding and the output layer, searched eagerly.
"""

import keras
import numpy as np
from keras import ops

import keras_attn as ka

VOCAB, UNITS, PAD, START, END = 12, 32, 0, 1, 2
LENGTH = 6


def reverse_task(n, rng, length=LENGTH):
    """`(source, decoder_in, target_out, weights)`: sources of 3 to
    `length` tokens in [3, VOCAB), padded with PAD; reversed targets + END."""
    sizes = rng.integers(3, length + 1, n)
    src = np.full((n, length), PAD, "int32")
    out = np.full((n, length + 1), PAD, "int32")
    for i, size in enumerate(sizes):
        tokens = rng.integers(3, VOCAB, size)
        src[i, :size] = tokens
        out[i, : size + 1] = [*tokens[::-1], END]
    decoder_in = np.concatenate([np.full((n, 1), START, "int32"), out[:, :-1]], 1)
    return src, decoder_in, out, (out != PAD).astype("float32")


def build_model(seed=0, learning_rate=0.01):
    """The toy `Seq2SeqModel`, compiled for `fit` (Adam, masked loss)."""
    keras.utils.set_random_seed(seed)
    encoder = keras.Sequential(
        [
            keras.layers.Embedding(VOCAB, UNITS, mask_zero=True),
            keras.layers.GRU(UNITS, return_sequences=True, return_state=True),
        ],
        name="encoder",
    )
    decoder = ka.AttentionDecoder(
        keras.layers.Embedding(VOCAB, UNITS),
        ka.BahdanauAttentionCell(
            keras.layers.GRUCell(UNITS), ka.BahdanauAttention(UNITS)
        ),
        keras.layers.Dense(VOCAB),
    )
    model = ka.Seq2SeqModel(encoder, decoder, start_id=START, end_id=END, pad_id=PAD)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    src, decoder_in, _, _ = reverse_task(2, np.random.default_rng(seed))
    model([src, decoder_in])
    return model


def train(model, steps, seed=0, batch_size=64, task=reverse_task):
    """`fit` for `steps` batches of `task`; returns the last loss."""
    src, decoder_in, out, weights = task(
        steps * batch_size, np.random.default_rng(seed)
    )
    history = model.fit(
        [src, decoder_in],
        out,
        sample_weight=weights,
        batch_size=batch_size,
        epochs=1,
        verbose=0,
        shuffle=False,
    )
    return history.history["loss"][-1]


def exact_match(model, n=256, seed=1, task=reverse_task):
    """The share of `n` fresh sources whose targets greedy `generate`
    writes exactly (their reverse, for `reverse_task`)."""
    src, _, out, _ = task(n, np.random.default_rng(seed))
    ids = ops.convert_to_numpy(model.generate(src, max_length=LENGTH + 1).ids)
    expected = np.where(out == PAD, END, out)  # the search pads with END
    return float(np.mean(np.all(ids == expected, axis=1)))


def hand_written_search(model, src, strategy="greedy", **options):
    """The search as written by hand before `AttentionDecoder.generate`:
    eager, over a step that calls the kept layers."""
    decoder = model.decoder
    cell, embedding, dense = decoder.cell, decoder.embedding, decoder.output_layer

    def step(ids, states):
        output, states = cell(embedding(ids), states)
        return ops.log_softmax(dense(output)), states

    memory, *states = model.encoder(src)
    states = cell.get_initial_state_with_memory(memory, src != PAD, states)
    start_ids = ops.full((src.shape[0],), START, "int32")
    search = {
        "greedy": ka.greedy_search,
        "beam": ka.beam_search,
        "sampling": ka.sampling_search,
    }[strategy]
    if strategy == "beam":
        options.setdefault("beam_size", 4)
    return search(step, states, start_ids, END, LENGTH + 1, **options)
