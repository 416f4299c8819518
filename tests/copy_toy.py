"""The toy of the copying decoder's tests: echo a source whose words are
partly outside the output vocabulary.

Sources of 3 to 6 tokens draw from the words `[4, VOCAB)` and the OOV slots
`[VOCAB, VOCAB + NUM_OOV)` (extended ids: a word the decoder cannot
generate, only copy); the target is the source itself, then END. The
encoder reads an OOV as UNK, so only copying (attention on the right
position) writes it. A `keras_attn.Seq2SeqModel` whose `AttentionDecoder`
has `copy=True` learns it.
"""

import keras
import numpy as np

import keras_attn as ka
from benchmarks import toy_reverse

VOCAB, UNITS, PAD, START, END, UNK = 12, 32, 0, 1, 2, 3
NUM_OOV, LENGTH = 4, toy_reverse.LENGTH


def copy_task(n, rng, length=LENGTH):
    """`(source, decoder_in, target_out, weights)` in extended ids."""
    sizes = rng.integers(3, length + 1, n)
    src = np.full((n, length), PAD, "int32")
    out = np.full((n, length + 1), PAD, "int32")
    for i, size in enumerate(sizes):
        tokens = rng.integers(4, VOCAB + NUM_OOV, size)
        src[i, :size] = tokens
        out[i, : size + 1] = [*tokens, END]
    decoder_in = np.concatenate([np.full((n, 1), START, "int32"), out[:, :-1]], 1)
    return src, decoder_in, out, (out != PAD).astype("float32")


def build_model(seed=0, units=UNITS, learning_rate=0.01):
    """The copying toy `Seq2SeqModel`, compiled for `fit`."""
    keras.utils.set_random_seed(seed)
    encoder = keras.Sequential(
        [
            keras.layers.Embedding(VOCAB, units, mask_zero=True),
            keras.layers.GRU(units, return_sequences=True, return_state=True),
        ],
        name="encoder",
    )
    decoder = ka.AttentionDecoder(
        keras.layers.Embedding(VOCAB, units),
        ka.BahdanauAttentionCell(
            keras.layers.GRUCell(units), ka.BahdanauAttention(units)
        ),
        keras.layers.Dense(VOCAB),
        copy=True,
        num_oov=NUM_OOV,
        unk_id=UNK,
    )
    model = ka.Seq2SeqModel(encoder, decoder, start_id=START, end_id=END, pad_id=PAD)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        # The decoder gives probabilities over the extended vocabulary.
        loss=keras.losses.SparseCategoricalCrossentropy(),
    )
    src, decoder_in, _, _ = copy_task(2, np.random.default_rng(seed))
    model([src, decoder_in])
    return model


def train(model, steps, seed=0, batch_size=64):
    """`fit` for `steps` batches of `copy_task`; returns the last loss."""
    return toy_reverse.train(model, steps, seed, batch_size, task=copy_task)


def exact_match(model, n=256, seed=1):
    """The share of `n` fresh sources that greedy `generate` echoes exactly."""
    return toy_reverse.exact_match(model, n, seed, task=copy_task)
