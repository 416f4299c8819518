"""The mask Keras propagates with the memory is honoured on every call path.

Keras' `Layer.__call__` fills `mask=` only when the call has a single tensor
argument; the layers read the masks the tensors carry otherwise. Each test
decodes the same sources twice, the second time with three more padding
tokens, and checks padding invariance: the outputs, the attention weights
and the decoded ids do not change, and the weight on every padded position
is exactly 0.
"""

import keras
import numpy as np
import pytest
from keras import ops

import keras_attn as ka
from keras_attn.layers.masking import keras_mask

VOCAB, DIM, PAD = 11, 8, 3
# Lengths 3 and 5: the first row is padded already.
SOURCES = np.array([[4, 7, 2, 0, 0], [3, 9, 5, 6, 8]], "int32")
PADDED = np.pad(SOURCES, ((0, 0), (0, PAD)))
TARGETS = np.array([[1, 5, 6, 0], [1, 2, 3, 4]], "int32")
SCORES = {
    "dot": lambda: ka.DotAttention(),
    "general": lambda: ka.GeneralAttention(),
    "bahdanau": lambda: ka.BahdanauAttention(6),
    "concat": lambda: ka.ConcatAttention(6),
    "coverage": lambda: ka.CoverageAttention(6),
}


def _np(x):
    return ops.convert_to_numpy(x)


def _embeddings(seed=0):
    keras.utils.set_random_seed(seed)
    source = keras.layers.Embedding(VOCAB, DIM, mask_zero=True)
    target = keras.layers.Embedding(VOCAB, DIM, mask_zero=True)
    return source, target


def assert_padding_invariant(short, long, short_weights, long_weights, tokens):
    """Same outputs and weights with more padding; zero weight on padding.

    Args:
        short, long: The outputs for `SOURCES` and `PADDED`.
        short_weights, long_weights: Their attention weights `(..., Tv)`.
        tokens: The source tokens of `long_weights`, `(batch, Tv)`.
    """
    np.testing.assert_allclose(_np(long), _np(short), rtol=1e-5, atol=1e-6)
    long_weights = _np(long_weights)
    length = _np(short_weights).shape[-1]
    np.testing.assert_allclose(
        long_weights[..., :length], _np(short_weights), rtol=1e-5, atol=1e-6
    )
    padding = np.broadcast_to(
        (tokens == 0).reshape(
            tokens.shape[:1] + (1,) * (long_weights.ndim - 2) + (-1,)
        ),
        long_weights.shape,
    )
    assert padding[..., length:].all() and padding.any(axis=-1).all()
    assert np.all(long_weights[padding] == 0.0)


@pytest.mark.parametrize("score", sorted(SCORES))
@pytest.mark.parametrize("how", ["positional", "keyword", "tensor_query_mask"])
def test_score_layers_read_the_propagated_value_mask(score, how):
    source, target = _embeddings()
    layer = SCORES[score]()
    query = target(TARGETS)

    def attend(tokens):
        value = source(tokens)
        if how == "positional":
            return layer([query, value], return_attention_scores=True)
        if how == "keyword":
            return layer(inputs=[query, value], return_attention_scores=True)
        # A tensor `query_mask=` stops Keras from filling `mask`.
        query_mask = ops.convert_to_tensor(TARGETS != 0)
        return layer(
            [query, value], query_mask=query_mask, return_attention_scores=True
        )

    (short, w_short), (long, w_long) = attend(SOURCES), attend(PADDED)
    assert_padding_invariant(short, long, w_short, w_long, PADDED)


@pytest.mark.parametrize("score", sorted(SCORES))
def test_a_tensor_value_mask_keeps_the_propagated_query_mask(score):
    source, target = _embeddings()
    layer = SCORES[score]()
    query, value = target(TARGETS), source(PADDED)
    context, weights = layer(
        [query, value],
        value_mask=ops.convert_to_tensor(PADDED != 0),
        return_attention_scores=True,
    )
    # The padded target step (row 0, step 3) gets no context and no weight,
    # as the mask the output carries says.
    assert np.all(_np(context)[0, 3] == 0.0) and np.all(_np(weights)[0, 3] == 0.0)
    assert np.abs(_np(context)[TARGETS != 0]).min(axis=-1).max() > 0
    out_mask = keras_mask(context)
    np.testing.assert_array_equal(_np(out_mask), TARGETS != 0)


@pytest.mark.parametrize("score", ["dot", "bahdanau"])
def test_an_explicit_value_mask_wins(score):
    source, target = _embeddings()
    layer = SCORES[score]()
    narrower = np.array([[True, False, True, False, False]] * 2)
    _, weights = layer(
        [target(TARGETS), source(SOURCES)],
        value_mask=narrower,
        return_attention_scores=True,
    )
    assert np.all(_np(weights)[..., ~narrower[0]] == 0.0)


def _cell(style="luong"):
    attention = ka.DotAttention() if style == "luong" else ka.BahdanauAttention(6)
    return ka.AttentionCellWrapper(
        keras.layers.LSTMCell(DIM), attention, style=style, return_alignments=True
    )


@pytest.mark.parametrize("style", ["luong", "bahdanau"])
@pytest.mark.parametrize("how", ["positional", "keyword", "initial_state"])
def test_attention_rnn_reads_the_memory_mask(style, how):
    source, target = _embeddings()
    rnn = ka.AttentionRNN(_cell(style))
    state = [np.full((2, DIM), 0.1, "float32")] * 2

    def decode(tokens):
        inputs = [target(TARGETS), source(tokens)]
        if how == "positional":
            return rnn(inputs)
        if how == "keyword":
            return rnn(inputs=inputs)
        return rnn(inputs, initial_state=state)

    (short, w_short), (long, w_long) = decode(SOURCES), decode(PADDED)
    assert_padding_invariant(short, long, w_short, w_long, PADDED)


def test_attention_rnn_explicit_memory_mask_wins():
    source, target = _embeddings()
    rnn = ka.AttentionRNN(_cell())
    narrower = np.array([[True, True, False, False, False]] * 2)
    _, weights = rnn(
        [target(TARGETS), source(SOURCES)],
        initial_state=[np.zeros((2, DIM), "float32")] * 2,
        memory_mask=narrower,
    )
    assert np.all(_np(weights)[..., 2:] == 0.0)


@pytest.mark.parametrize("how", ["positional", "keyword"])
def test_a_cell_in_keras_rnn_reads_the_memory_mask(how):
    source, target = _embeddings()
    cell = _cell()
    cell.build((None, DIM))
    rnn = keras.layers.RNN(cell, return_sequences=True)
    h = c = np.full((2, DIM), 0.1, "float32")

    def decode(tokens):
        memory = source(tokens)
        if how == "positional":
            states = cell.get_initial_state_with_memory(memory, None, [h, c])
        else:
            states = cell.get_initial_state_with_memory(
                memory=memory, initial_state=[h, c]
            )
        return cell.split_output(rnn(target(TARGETS), initial_state=states))

    (short, w_short), (long, w_long) = decode(SOURCES), decode(PADDED)
    assert_padding_invariant(short, long, w_short, w_long, PADDED)


def _seq2seq(source_length):
    """Encoder-decoder with the masks only Keras carries, as the TFA guide's."""
    source_ids = keras.Input((source_length,), dtype="int32")
    target_ids = keras.Input((None,), dtype="int32")
    source, target = _embeddings(seed=1)
    memory, h, c = keras.layers.LSTM(DIM, return_sequences=True, return_state=True)(
        source(source_ids)
    )
    outputs, alignments = ka.AttentionRNN(_cell(), name="decoder")(
        [target(target_ids), memory], initial_state=[h, c]
    )
    logits = keras.layers.Dense(VOCAB)(outputs)
    return keras.Model([source_ids, target_ids], [logits, alignments])


def test_a_saved_and_reloaded_model_reads_the_memory_mask(tmp_path):
    model = _seq2seq(None)
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    for m in (model, loaded):
        short = m.predict([SOURCES, TARGETS], verbose=0)
        long = m.predict([PADDED, TARGETS], verbose=0)
        assert_padding_invariant(short[0], long[0], short[1], long[1], PADDED)
        eager = m([PADDED, TARGETS])
        np.testing.assert_allclose(_np(eager[1]), long[1], atol=1e-6)


def _search_step(attention, memory, table, projection):
    """A step attending over a prepared memory; its extras are the weights."""

    def step(ids, state):
        context, weights = attention.step(ops.take(table, ids, axis=0), memory)
        logits = ops.matmul(context, projection)
        return ops.log_softmax(logits, axis=-1), state, weights

    return step


@pytest.mark.parametrize("beam_size", [1, 3])
def test_searches_over_a_tiled_memory_keep_its_mask(beam_size):
    source, _ = _embeddings()
    rng = np.random.default_rng(0)
    table = ops.convert_to_tensor(rng.normal(size=(VOCAB, DIM)).astype("float32"))
    projection = ops.convert_to_tensor(
        rng.normal(size=(DIM, VOCAB)).astype("float32") * 3
    )
    attention = ka.BahdanauAttention(6)
    attention.build([(None, DIM), (None, None, DIM)])
    starts = np.array([1, 2], "int32")

    def search(tokens):
        encoded = source(tokens)
        if beam_size == 1:
            memory = attention.prepare_memory(encoded)
            step = _search_step(attention, memory, table, projection)
            return ka.greedy_search(step, None, starts, 0, 6)
        memory = attention.prepare_memory(ka.tile_batch(encoded, beam_size))
        step = _search_step(attention, memory, table, projection)
        return ka.beam_search(step, None, starts, 0, 6, beam_size)

    short, long = search(SOURCES), search(PADDED)
    np.testing.assert_array_equal(_np(long.ids), _np(short.ids))
    assert_padding_invariant(
        long.scores, short.scores, short.extras, long.extras, PADDED
    )
    assert np.all(_np(long.extras)[:, :, SOURCES.shape[1] :] == 0.0)


def test_pointer_network_reads_the_points_mask():
    rng = np.random.default_rng(0)
    points = rng.normal(size=(2, 5, 2)).astype("float32")
    points[0, 3:] = 0.0  # padding, as a Masking layer sees it
    padded = np.pad(points, ((0, 0), (0, PAD), (0, 0)))
    targets = np.array([[1, 2, 0], [3, 1, 0]], "int32")
    keras.utils.set_random_seed(0)
    layer = ka.PointerNetwork(units=8)
    masking = keras.layers.Masking()
    short = _np(layer([masking(points), targets]))
    long = _np(layer([masking(padded), targets]))
    # Column 0 is END; position i of the points is column i + 1.
    np.testing.assert_allclose(long[..., :6], short, rtol=1e-5, atol=1e-6)
    assert np.all(np.isneginf(long[..., 6:])) and np.all(np.isneginf(short[0, :, 4:]))
    state = layer.initial_state(masking(padded))
    np.testing.assert_array_equal(_np(state["mask"])[:, 1:], np.any(padded != 0, -1))
