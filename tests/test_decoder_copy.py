"""`AttentionDecoder(copy=True)`: the pointer-generator decoder on a toy
whose targets are partly source words outside the output vocabulary.

The toy (tests/copy_toy.py) is fitted once per backend until greedy
`generate` echoes most fresh sources, OOV slots included; then `generate`
is held against the search over the decoder's own `step`, eager against
compiled, the teacher-forced output against the step and against
`pointer_generator_nll`, and a reloaded `.keras` model against the original.
"""

import copy_toy as toy
import keras
import numpy as np
import pytest
from keras import ops
from one_line_errors import one_line

import keras_attn as ka

STEPS = 60


@pytest.fixture(scope="module")
def model():
    model = toy.build_model()
    toy.train(model, STEPS)
    return model


@pytest.fixture
def batch():
    return toy.copy_task(16, np.random.default_rng(7))


def numpy(x):
    return ops.convert_to_numpy(x)


def test_fit_learns_to_copy_words_out_of_the_vocabulary(model):
    src, _, out, _ = toy.copy_task(256, np.random.default_rng(1))
    ids = numpy(model.generate(src, max_length=toy.LENGTH + 1).ids)
    expected = np.where(out == toy.PAD, toy.END, out)
    with_oov = (src >= toy.VOCAB).any(1)
    assert with_oov.mean() > 0.5  # most targets need a copied OOV
    assert np.all(ids == expected, axis=1)[with_oov].mean() >= 0.9
    assert (ids >= toy.VOCAB).any()  # extended ids come back


def step_search(model, src, strategy, **options):
    """The search written over the decoder's `step`, eager."""
    decoder = model.decoder
    memory, mask, states = model.encode(src)
    states = decoder.initial_search_state(memory, mask, states, src)
    start_ids = ops.full((src.shape[0],), toy.START, "int32")
    search = {
        "greedy": ka.greedy_search,
        "beam": ka.beam_search,
        "sampling": ka.sampling_search,
    }[strategy]
    return search(decoder.step, states, start_ids, toy.END, toy.LENGTH + 1, **options)


@pytest.mark.parametrize(
    "strategy, options",
    [
        ("greedy", {}),
        ("beam", {"beam_size": 3, "length_penalty": 0.6}),
        ("sampling", {"seed": 3, "temperature": 2.0}),
        ("greedy", {"no_repeat_ngram_size": 2, "banned_ids": [5]}),
    ],
)
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "eager"])
def test_generate_is_the_search_over_the_step(
    model, batch, strategy, options, compiled
):
    src = batch[0]
    got = model.generate(
        src, max_length=toy.LENGTH + 1, strategy=strategy, compiled=compiled, **options
    )
    expected = step_search(model, src, strategy, **options)
    np.testing.assert_array_equal(numpy(got.ids), numpy(expected.ids))
    np.testing.assert_array_equal(numpy(got.lengths), numpy(expected.lengths))
    np.testing.assert_allclose(numpy(got.scores), numpy(expected.scores), atol=1e-4)


@pytest.mark.torch_only
def test_a_second_torch_call_of_the_same_shape_compiles_nothing(model, batch):
    # Copying and banning pad the scores: `keras.ops.pad` would build a Keras
    # op, with a new name, at every call, and fail dynamo's guards.
    import torch

    # Dynamo's caches outlive a model: start from none, whatever ran before.
    torch.compiler.reset()
    options = {"max_length": toy.LENGTH + 1, "no_repeat_ngram_size": 2}
    options["banned_ids"] = [5]
    model.generate(batch[0], **options)
    with torch.compiler.set_stance("fail_on_recompile"):
        model.generate(batch[0][::-1], **options)


def test_the_step_gives_the_log_of_the_teacher_forced_output(model, batch):
    src, decoder_in, _, _ = batch
    probs = numpy(model([src, decoder_in]))
    assert probs.shape == (16, toy.LENGTH + 1, toy.VOCAB + toy.NUM_OOV)
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)
    memory, mask, states = model.encode(src)
    states = model.decoder.initial_search_state(memory, mask, states, src)
    for t in range(decoder_in.shape[1]):
        log_probs, states, _ = model.decoder.step(decoder_in[:, t], states)
        np.testing.assert_allclose(np.exp(numpy(log_probs)), probs[:, t], atol=1e-5)


def test_the_loss_is_pointer_generator_nll_of_the_parts(model, batch):
    src, decoder_in, out, weights = batch
    decoder = model.decoder
    loss = keras.losses.SparseCategoricalCrossentropy(reduction=None)(
        out, model([src, decoder_in])
    )
    memory, mask, states = model.encode(src)
    embedded = decoder.embedding(decoder.in_vocabulary(decoder_in))
    hidden, attention = decoder.rnn([embedded, memory], states, memory_mask=mask)
    context = ops.einsum("btv,bvd->btd", attention, memory)
    p_gen = decoder.copy([context, hidden, embedded])
    expected = ka.pointer_generator_nll(
        p_gen,
        decoder.output_layer(hidden),
        attention,
        src,
        out,
        mask=weights,
        from_logits=True,
        reduction="none",
    )
    valid = weights > 0
    np.testing.assert_allclose(numpy(loss)[valid], numpy(expected)[valid], atol=1e-4)


def test_a_saved_model_generates_the_same_ids(model, batch, tmp_path):
    src = batch[0]
    path = str(tmp_path / "copy.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert reloaded.decoder.get_config()["num_oov"] == toy.NUM_OOV
    assert isinstance(reloaded.decoder.copy, ka.PointerGenerator)
    np.testing.assert_array_equal(
        numpy(reloaded.generate(src, strategy="beam").ids),
        numpy(model.generate(src, strategy="beam").ids),
    )


def test_the_decoder_generates_from_a_memory(model, batch):
    src = batch[0]
    memory, mask, states = model.encode(src)
    got = model.decoder.generate(
        memory,
        mask,
        states,
        source_ids=src,
        start_id=toy.START,
        end_id=toy.END,
        max_length=toy.LENGTH + 1,
    )
    expected = step_search(model, src, "greedy")
    np.testing.assert_array_equal(numpy(got.ids), numpy(expected.ids))


MISSING = (
    "`source_ids` is required: AttentionDecoder(copy=...) copies from the "
    "source, whose extended ids (int (batch, Tv), out-of-vocabulary words as "
    "V + k) it needs. Received: source_ids=None"
)


@pytest.mark.parametrize(
    "call",
    [
        lambda d, m, s: d.generate(m, start_id=1, end_id=2, max_length=3),
        lambda d, m, s: d(np.ones((2, 3), "int32"), m),
        lambda d, m, s: d.initial_search_state(m),
    ],
    ids=["generate", "call", "initial_search_state"],
)
def test_missing_source_ids_are_refused_in_one_line(model, batch, call):
    memory, _, _ = model.encode(batch[0][:2])
    with pytest.raises(ValueError) as e:
        call(model.decoder, memory, batch[0][:2])
    assert plain(one_line(e)) == MISSING


def test_source_ids_of_another_length_are_refused(model, batch):
    memory, _, _ = model.encode(batch[0][:2])
    with pytest.raises(ValueError) as e:
        model.decoder(np.ones((2, 3), "int32"), memory, source_ids=np.ones((2, 4)))
    assert plain(one_line(e)) == (
        "`source_ids` must have shape (batch, Tv), one id per memory position; "
        "the memory has shape (2, 6, 32). Received: source_ids.shape=(2, 4)"
    )


def plain(line):
    """`line` without the bold Keras gives an error raised in a `call`."""
    return line.removeprefix("\x1b[1m").removesuffix("\x1b[0m")


def decoder(**kwargs):
    return ka.AttentionDecoder(
        keras.layers.Embedding(6, 4),
        ka.BahdanauAttentionCell(keras.layers.GRUCell(4), ka.BahdanauAttention(4)),
        keras.layers.Dense(6),
        **kwargs,
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"copy": True},
            "`unk_id` must be an int in [0, 6): a copying AttentionDecoder embeds "
            "the extended ids it is fed (>= 6) as that word. Received: unk_id=None",
        ),
        (
            {"copy": "yes", "unk_id": 3},
            "`copy` must be True, a PointerGenerator or None. Received: copy='yes'",
        ),
        (
            {"copy": True, "unk_id": 3, "num_oov": -1},
            "`num_oov` must be None (the source's length) or an int >= 0. "
            "Received: num_oov=-1",
        ),
    ],
    ids=["unk_id", "copy", "num_oov"],
)
def test_each_copy_argument_mistake_is_refused_in_one_line(kwargs, message):
    with pytest.raises(ValueError) as e:
        decoder(**kwargs)
    assert one_line(e) == message


def test_without_num_oov_the_slots_are_the_source_length():
    layer = decoder(copy=ka.PointerGenerator(), unk_id=3)
    assert layer.cell.return_alignments  # turned on: copying reads them
    memory = np.random.default_rng(0).random((2, 5, 4)).astype("float32")
    source = np.array([[3, 6, 7, 8, 9], [10, 4, 0, 0, 0]], "int32")
    probs = layer(np.array([[1, 6], [1, 10]], "int32"), memory, source_ids=source)
    assert tuple(probs.shape) == (2, 2, 6 + 5)
    config = layer.get_config()
    assert config["num_oov"] is None and config["unk_id"] == 3
    clone = ka.AttentionDecoder.from_config(config)
    assert isinstance(clone.copy, ka.PointerGenerator) and clone.unk_id == 3
