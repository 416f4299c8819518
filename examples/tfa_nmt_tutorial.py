"""TensorFlow Addons' NMT tutorial, ported to keras_attn, on any backend.

TFA's `docs/tutorials/networks_seq2seq_nmt.ipynb` trains an encoder-decoder
with Luong attention on English-Spanish pairs, then translates with greedy
and beam-3 decoding. This port keeps its blocks on a synthetic language pair
that it builds itself (no download), and adds saving and reloading:

    python -m examples.tfa_nmt_tutorial            # KERAS_BACKEND picks the backend

Each block and the TFA code it replaces:

* `make_pairs`: the dataset (`tf.data` over the Anki file). A toy language
  whose words translate one to one from a dictionary and whose adjacent word
  pairs swap places (an adjective after its noun), padded with 0.
* `build_model`, the encoder: the tutorial's `EncoderNetwork`, the same Keras
  `Embedding` and `LSTM`; `mask_zero=True` gives the memory mask
  (TFA: `memory_sequence_length`).
* `build_model`, the decoder: `DecoderNetwork`.
  `tfa.seq2seq.LuongAttention(units)` is `ka.GeneralAttention()`;
  `tfa.seq2seq.AttentionWrapper(LSTMCell(units), attention,
  attention_layer_size=units)` is `ka.AttentionCellWrapper(LSTMCell(units),
  attention, style="luong", attention_units=units,
  attention_activation=None)`; `BasicDecoder(cell, TrainingSampler(),
  output_layer=dense)` with `build_decoder_initial_state` is
  `ka.AttentionRNN(cell)([target_embeddings, memory], initial_state=[h, c])`
  then the `Dense` layer: teacher forcing over the shifted targets.
* `train`: `loss_function` and `train_step` (a `GradientTape` loop), here
  `compile` and `fit` with the padding's weights at 0.
* `Translator.greedy`: `evaluate_sentence`, a `BasicDecoder` with a
  `GreedyEmbeddingSampler` and `dynamic_decode`; here `ka.greedy_search` over
  a one-step function.
* `Translator.beam`: `beam_evaluate_sentence`, a `BeamSearchDecoder` with
  `beam_width=3` over memory and states `tile_batch`ed by hand; here
  `ka.beam_search(..., beam_size=3)`, which tiles the states it is given (the
  memory travels in the cell's states).
* `Translator(keras.saving.load_model(path))`, in `run`: not in the
  tutorial. The decoding code takes its layers from the model by name
  (`AttentionRNN.cell` is the trained attention cell), so a reloaded model
  decodes as the trained one does.
* `run`: the tutorial's order, end to end; `main` prints what it returns.
"""

import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import keras
import numpy as np
from keras import ops

import keras_attn as ka
from examples.command_line import OneLineParser, check_at_least

PAD, START, END = 0, 1, 2
WORDS = 12  # words of each language; ids 3 .. 3 + WORDS - 1
VOCAB = WORDS + 3
MIN_WORDS, MAX_WORDS = 3, 8
MAX_LENGTH = MAX_WORDS + 1  # the decoder's steps: the words and the end token


def make_pairs(count, seed, dictionary_seed=0):
    """Sentence pairs of the toy language: `(sources, decoder_inputs, targets)`.

    Sources `(count, MAX_WORDS)` and targets `(count, MAX_LENGTH)` are int32,
    padded with `PAD`; a target ends with `END`, and the decoder's inputs are
    the targets shifted right behind `START` (teacher forcing).
    """
    dictionary = np.random.default_rng(dictionary_seed).permutation(WORDS) + 3
    rng = np.random.default_rng(seed)
    sources = np.full((count, MAX_WORDS), PAD, "int32")
    targets = np.full((count, MAX_LENGTH), PAD, "int32")
    for row, size in enumerate(rng.integers(MIN_WORDS, MAX_WORDS + 1, count)):
        words = rng.integers(3, 3 + WORDS, size)
        swapped = words.copy()
        pairs = size // 2 * 2
        swapped[:pairs] = words[:pairs].reshape(-1, 2)[:, ::-1].reshape(-1)
        sources[row, :size] = words
        targets[row, : size + 1] = [*dictionary[swapped - 3], END]
    decoder_inputs = np.concatenate(
        [np.full((count, 1), START, "int32"), targets[:, :-1]], axis=1
    )
    return sources, decoder_inputs, targets


def build_model(units=64, embedding_dim=32):
    """The tutorial's encoder and decoder as one Keras model; returns logits."""
    source = keras.Input((None,), dtype="int32", name="source")
    decoder_input = keras.Input((None,), dtype="int32", name="decoder_input")
    # EncoderNetwork: embedding, then an LSTM whose outputs are the memory.
    source_embedding = keras.layers.Embedding(
        VOCAB, embedding_dim, mask_zero=True, name="source_embedding"
    )
    memory, h, c = keras.layers.LSTM(
        units, return_sequences=True, return_state=True, name="encoder"
    )(source_embedding(source))
    # DecoderNetwork: LuongAttention in an AttentionWrapper over an LSTMCell.
    cell = ka.AttentionCellWrapper(
        keras.layers.LSTMCell(units),
        ka.GeneralAttention(),  # tfa.seq2seq.LuongAttention
        style="luong",
        attention_units=units,  # attention_layer_size
        attention_activation=None,  # TFA's attention layer is linear
    )
    target_embedding = keras.layers.Embedding(
        VOCAB, embedding_dim, name="target_embedding"
    )
    # BasicDecoder(TrainingSampler) with the encoder's state as the cell's.
    # The memory mask is passed as it is at inference, where the source's
    # padding is known from its ids.
    hidden = ka.AttentionRNN(cell, name="decoder")(
        [target_embedding(decoder_input), memory],
        initial_state=[h, c],
        memory_mask=ops.not_equal(source, PAD),
    )
    logits = keras.layers.Dense(VOCAB, name="logits")(hidden)
    return keras.Model([source, decoder_input], logits)


def train(model, pairs, epochs=1, batch_size=64, learning_rate=0.02):
    """Teacher forcing; the loss ignores the padding after the end token."""
    sources, decoder_inputs, targets = pairs
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    history = model.fit(
        [sources, decoder_inputs],
        targets,
        sample_weight=(targets != PAD).astype("float32"),
        batch_size=batch_size,
        epochs=epochs,
        verbose=0,
    )
    return history.history["loss"]


class Translator:
    """Greedy and beam decoding with the layers of a trained or reloaded model.

    Args:
        model: A model of `build_model`, trained, or as
            `keras.saving.load_model` returns it.
    """

    def __init__(self, model):
        # The encoder's outputs are the memory and the decoder's first state.
        self.encoder = keras.Model(
            model.get_layer("source").output, model.get_layer("encoder").output
        )
        self.cell = model.get_layer("decoder").cell
        self.target_embedding = model.get_layer("target_embedding")
        self.output_layer = model.get_layer("logits")

    def step(self, ids, states):
        """One decoder step: `(log_probs (N, VOCAB), states)`.

        TFA's decoders applied the softmax to the output layer's logits
        themselves; a keras_attn search takes normalized log-probabilities.
        """
        output, states = self.cell(self.target_embedding(ids), states)
        return ops.log_softmax(self.output_layer(output)), states

    def initial_states(self, sources):
        memory, h, c = self.encoder(sources)
        return self.cell.get_initial_state_with_memory(
            memory, ops.not_equal(sources, PAD), initial_state=[h, c]
        )

    def greedy(self, sources):
        """`evaluate_sentence`: a `DecodingResult` with ids `(B, MAX_LENGTH)`."""
        sources = ops.convert_to_tensor(sources, "int32")
        start_ids = ops.full((ops.shape(sources)[0],), START, dtype="int32")
        return ka.greedy_search(
            self.step, self.initial_states(sources), start_ids, END, MAX_LENGTH
        )

    def beam(self, sources, beam_size=3):
        """`beam_evaluate_sentence`: the best of `beam_size` hypotheses."""
        sources = ops.convert_to_tensor(sources, "int32")
        start_ids = ops.full((ops.shape(sources)[0],), START, dtype="int32")
        return ka.beam_search(
            self.step,
            self.initial_states(sources),
            start_ids,
            END,
            MAX_LENGTH,
            beam_size=beam_size,
        )


def exact_match(result, targets):
    """The share of rows decoded exactly: every word and then the end token."""
    ids = ops.convert_to_numpy(result.ids)
    lengths = ops.convert_to_numpy(result.lengths)
    words = targets != PAD
    words[np.arange(len(targets)), words.sum(1) - 1] = False  # the end token
    matches = [
        length == row_words.sum() and np.array_equal(row[:length], target[:length])
        for row, length, row_words, target in zip(
            ids, lengths, words, targets, strict=True
        )
    ]
    return float(np.mean(matches))


class Run(NamedTuple):
    """What `run` returns: the model, its losses, and the held-out decodings."""

    model: keras.Model
    losses: list
    sources: np.ndarray  # held-out sources, none of them seen in training
    targets: np.ndarray
    greedy: object  # DecodingResult of `Translator.greedy`
    beam: object  # DecodingResult of `Translator.beam`, 3 beams
    reloaded_greedy: object  # the same decodings by the saved and reloaded model
    reloaded_beam: object


def run(pairs=4000, epochs=6, units=64, held_out=500, seed=0):
    """The tutorial end to end: trains, decodes held-out pairs, saves, reloads."""
    keras.utils.set_random_seed(seed)
    model = build_model(units=units, embedding_dim=units // 2)
    training_pairs = make_pairs(pairs, seed=1)
    losses = train(model, training_pairs, epochs=epochs)
    seen = {tuple(row) for row in training_pairs[0]}
    sources, _, targets = make_pairs(held_out, seed=2)
    unseen = np.array([tuple(row) not in seen for row in sources])
    sources, targets = sources[unseen], targets[unseen]
    translator = Translator(model)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "nmt.keras"
        model.save(path)
        reloaded = Translator(keras.saving.load_model(path))
    return Run(
        model,
        losses,
        sources,
        targets,
        translator.greedy(sources),
        translator.beam(sources, beam_size=3),
        reloaded.greedy(sources),
        reloaded.beam(sources, beam_size=3),
    )


def main(argv=None):
    parser = OneLineParser(
        prog="python -m examples.tfa_nmt_tutorial",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--pairs", type=int, default=4000)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--units", type=int, default=64)
    args = parser.parse_args(argv)
    # Half the units are the embedding's size.
    check_at_least(parser, args, {"pairs": 1, "epochs": 1, "units": 2})
    began = time.perf_counter()
    result = run(args.pairs, args.epochs, args.units)
    losses = result.losses
    print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f} in {args.epochs} epochs")
    print(
        f"held-out exact match ({len(result.sources)} pairs): "
        f"greedy {exact_match(result.greedy, result.targets):.3f}, "
        f"beam 3 {exact_match(result.beam, result.targets):.3f}"
    )
    same = np.array_equal(
        ops.convert_to_numpy(result.reloaded_beam.ids),
        ops.convert_to_numpy(result.beam.ids),
    )
    print(f"the reloaded model decodes the same ids: {same}")
    ids, lengths = ops.convert_to_numpy(result.beam.ids), result.beam.lengths
    for source, row, length in zip(
        result.sources[:3], ids, ops.convert_to_numpy(lengths), strict=False
    ):
        print(source[source != PAD], "->", row[:length])
    print(f"{time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
