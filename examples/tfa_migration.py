"""Moving from tfa.seq2seq: an attentional encoder-decoder, the TFA way.

It learns to reverse short padded sequences for a few steps, then decodes
with beam search. Each block names the `tfa.seq2seq` code it replaces. Any
backend:

    KERAS_BACKEND=jax python -m examples.tfa_migration

The code between the README markers is the first code block of
docs/tfa-migration.md, character for character (`tests/test_tfa_migration.py`
checks that and runs it).
"""

# README begin
import keras
import numpy as np
from keras import ops

import keras_attn as ka

VOCAB, UNITS, PAD, START, END = 12, 32, 0, 1, 2

# Encoder: the same Keras layers as with TFA. `mask_zero` gives the memory
# mask (TFA: `memory_sequence_length`).
source = keras.Input((None,), dtype="int32", name="source")
target_in = keras.Input((None,), dtype="int32")
source_embedding = keras.layers.Embedding(VOCAB, UNITS, mask_zero=True)
target_embedding = keras.layers.Embedding(VOCAB, UNITS, name="target_embedding")
memory, h, c = keras.layers.LSTM(
    UNITS, return_sequences=True, return_state=True, name="encoder"
)(source_embedding(source))

# tfa.seq2seq.AttentionWrapper(LSTMCell(UNITS), BahdanauAttention(UNITS,
#     memory, normalize=True), attention_layer_size=UNITS,
#     alignment_history=True, initial_cell_state=[h, c])
cell = ka.AttentionCellWrapper(
    keras.layers.LSTMCell(UNITS),
    ka.BahdanauAttention(UNITS, normalize=True),
    style="luong",
    attention_units=UNITS,
    attention_activation=None,  # TFA's attention layer is linear
    return_alignments=True,
)
# BasicDecoder(cell, TrainingSampler()) + dynamic_decode: teacher forcing is
# the attention RNN over the shifted targets.
hidden, alignments = ka.AttentionRNN(cell, name="decoder")(
    [target_embedding(target_in), memory], initial_state=[h, c]
)
output_layer = keras.layers.Dense(VOCAB, name="logits")
model = keras.Model([source, target_in], output_layer(hidden))


# tfa.seq2seq.sequence_loss(logits, targets, weights): the weighted
# cross-entropy over the sum of the weights.
sequence_loss = keras.losses.SparseCategoricalCrossentropy(
    from_logits=True, reduction="mean_with_sample_weight"
)


def reverse_task(n, rng, length=6):
    """Sources of 3 to `length` tokens in [3, VOCAB), padded; reversed targets."""
    sizes = rng.integers(3, length + 1, n)
    src = np.full((n, length), PAD, "int32")
    out = np.full((n, length + 1), PAD, "int32")
    for i, size in enumerate(sizes):
        tokens = rng.integers(3, VOCAB, size)
        src[i, :size] = tokens
        out[i, : size + 1] = [*tokens[::-1], END]
    decoder_in = np.concatenate([np.full((n, 1), START, "int32"), out[:, :-1]], 1)
    return src, decoder_in, out, (out != PAD).astype("float32")


def train(steps=20, batch_size=32, seed=0):
    """A few optimizer steps; returns the losses."""
    rng = np.random.default_rng(seed)
    optimizer = keras.optimizers.Adam(0.01)
    model.compile(optimizer=optimizer, loss=sequence_loss)
    losses = []
    for _ in range(steps):
        src, decoder_in, out, weights = reverse_task(batch_size, rng)
        loss = model.train_on_batch([src, decoder_in], out, sample_weight=weights)
        losses.append(float(loss))
    return losses


# Inference. tfa: tile_batch the memory and the encoder state, then
# BeamSearchDecoder(cell, beam_width, embedding_fn, output_layer,
# length_penalty_weight). Here the memory travels in the cell's states, so
# `beam_search` tiles and reorders it itself; tensors a step function captures
# would go through `ka.tile_batch(t, beam_size)`.
encoder = keras.Model(source, [memory, h, c])


def step(ids, states):
    """One decoder step: `(log_probs, states, attention)` (the `extras`)."""
    output, states = cell(target_embedding(ids), states)
    output, attention = cell.split_output(output)
    return ops.log_softmax(output_layer(output)), states, attention


def translate(src, beam_size=4, max_length=8, length_penalty=0.6):
    enc_memory, enc_h, enc_c = encoder(src)
    states = cell.get_initial_state_with_memory(
        enc_memory, src != PAD, initial_state=[enc_h, enc_c]
    )
    start_ids = ops.full((src.shape[0],), START, dtype="int32")
    return ka.beam_search(
        step,
        states,
        start_ids,
        END,
        max_length,
        beam_size,
        length_penalty=length_penalty,  # length_penalty_weight
    )


# README end


def main(argv=None):
    # Here, not above: the code above is the page's, which needs no parser.
    from examples.command_line import OneLineParser

    OneLineParser(
        prog="python -m examples.tfa_migration", description=__doc__.split("\n")[0]
    ).parse_args(argv)
    losses = train()
    print(f"loss: {losses[0]:.3f} -> {losses[-1]:.3f} in {len(losses)} steps")
    src = reverse_task(3, np.random.default_rng(1))[0]
    result = translate(src)
    ids, lengths = (
        ops.convert_to_numpy(result.ids),
        ops.convert_to_numpy(result.lengths),
    )
    for row, hypothesis, length in zip(src, ids, lengths, strict=True):
        print(row[row != PAD], "->", hypothesis[:length])


if __name__ == "__main__":
    main()
