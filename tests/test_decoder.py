"""`AttentionDecoder` and `Seq2SeqModel` on the reverse-the-sequence toy.

The toy (benchmarks/toy_reverse.py) is fitted once per backend until greedy
`generate` reverses most fresh sources; then `generate` is held against the
search written by hand over the same layers, eager against compiled, and
before against after more training.
"""

import keras
import numpy as np
import pytest
from keras import ops
from one_line_errors import one_line

import keras_attn as ka
from benchmarks import toy_reverse as toy

BACKEND = keras.backend.backend()
STEPS = 120


@pytest.fixture(scope="module")
def model():
    model = toy.build_model()
    toy.train(model, STEPS)
    return model


@pytest.fixture
def src():
    return toy.reverse_task(16, np.random.default_rng(7))[0]


def numpy(x):
    return ops.convert_to_numpy(x)


def test_fit_learns_to_reverse(model):
    assert toy.exact_match(model) >= 0.9


@pytest.mark.parametrize(
    "strategy, options",
    [
        ("greedy", {}),
        ("beam", {"beam_size": 4, "length_penalty": 0.6}),
        ("sampling", {"seed": 3, "temperature": 2.0}),
        ("greedy", {"no_repeat_ngram_size": 2, "banned_ids": [5]}),
    ],
)
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "eager"])
def test_generate_is_the_hand_written_search(model, src, strategy, options, compiled):
    got = model.generate(
        src, max_length=toy.LENGTH + 1, strategy=strategy, compiled=compiled, **options
    )
    expected = toy.hand_written_search(model, src, strategy, **options)
    np.testing.assert_array_equal(numpy(got.ids), numpy(expected.ids))
    np.testing.assert_array_equal(numpy(got.lengths), numpy(expected.lengths))
    np.testing.assert_allclose(numpy(got.scores), numpy(expected.scores), atol=1e-4)


def test_the_decoder_generates_from_a_memory(model, src):
    memory, *states = model.encoder(src)
    got = model.decoder.generate(
        memory,
        src != toy.PAD,
        states,
        start_id=toy.START,
        end_id=toy.END,
        max_length=toy.LENGTH + 1,
        strategy="beam",
        beam_size=3,
    )
    expected = toy.hand_written_search(model, src, "beam", beam_size=3)
    np.testing.assert_array_equal(numpy(got.ids), numpy(expected.ids))


def copy_task(n, rng):
    """The toy's sources as their own targets: what more training learns."""
    src, _, _, _ = toy.reverse_task(n, rng)
    out = np.concatenate([src, np.zeros((n, 1), "int32")], 1)
    lengths = (src != toy.PAD).sum(1)
    out[np.arange(n), lengths] = toy.END
    decoder_in = np.concatenate([np.full((n, 1), toy.START, "int32"), out[:, :-1]], 1)
    return src, decoder_in, out, (out != toy.PAD).astype("float32")


def test_more_training_between_two_calls_changes_the_ids(model, src):
    weights = model.get_weights()
    options = {"strategy": "beam", "beam_size": 2, "max_length": toy.LENGTH + 1}
    before = numpy(model.generate(src, **options).ids)
    try:
        toy.train(model, 15, task=copy_task)
        after = numpy(model.generate(src, **options).ids)
        # The compiled search read the new weights: the eager search's ids.
        eager = toy.hand_written_search(model, src, "beam", beam_size=2)
        np.testing.assert_array_equal(after, numpy(eager.ids))
        assert not np.array_equal(after, before)
    finally:
        model.set_weights(weights)
    again = numpy(model.generate(src, **options).ids)
    np.testing.assert_array_equal(again, before)


def test_a_second_call_of_the_same_shape_does_not_trace_again(model, monkeypatch):
    if BACKEND == "torch":
        # A counter in the step is state that dynamo guards on; torch says
        # itself whether a call would compile again.
        import torch

        # Dynamo's caches outlive a model: start from none, whatever ran before.
        torch.compiler.reset()
        rng = np.random.default_rng(11)
        options = {"max_length": 5, "strategy": "beam", "beam_size": 3}
        model.generate(toy.reverse_task(8, rng)[0], **options)
        with torch.compiler.set_stance("fail_on_recompile"):
            model.generate(toy.reverse_task(8, rng)[0], **options)  # other values
            with pytest.raises(RuntimeError, match="recompile"):
                model.generate(toy.reverse_task(5, rng)[0], **options)
        return
    decoder, calls = model.decoder, []
    step = decoder.step

    def counted(ids, states):
        calls.append(1)  # a Python side effect: runs when traced
        return step(ids, states)

    monkeypatch.setattr(decoder, "step", counted)
    rng = np.random.default_rng(11)
    options = {"max_length": 5, "strategy": "beam", "beam_size": 3}
    model.generate(toy.reverse_task(8, rng)[0], **options)
    first = len(calls)
    assert first > 0
    model.generate(toy.reverse_task(8, rng)[0], **options)  # other values
    assert len(calls) == first
    model.generate(toy.reverse_task(5, rng)[0], **options)  # another batch
    assert len(calls) > first


def test_stop_ids_end_the_rows_that_meet_them(model, src):
    plain = numpy(model.generate(src).ids)
    stop = int(plain[0, 0])
    result = model.generate(src, stop_ids=[stop])
    ids, lengths = numpy(result.ids), numpy(result.lengths)
    first = plain[:, 0] == stop
    assert first.any()
    np.testing.assert_array_equal(ids[first, 0], stop)
    np.testing.assert_array_equal(ids[first, 1:], toy.END)
    np.testing.assert_array_equal(lengths[first], 0)
    np.testing.assert_array_equal(ids[~first, 0], plain[~first, 0])


def test_sampling_without_a_seed_draws_anew_at_each_call(model, src):
    options = {"strategy": "sampling", "temperature": 5.0}
    a = numpy(model.generate(src, **options).ids)
    b = numpy(model.generate(src, **options).ids)
    assert not np.array_equal(a, b)


def test_a_saved_model_generates_the_same_ids(model, src, tmp_path):
    path = str(tmp_path / "toy.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    np.testing.assert_array_equal(
        numpy(reloaded.generate(src, strategy="beam").ids),
        numpy(model.generate(src, strategy="beam").ids),
    )


@pytest.mark.tf_only
def test_an_exported_generate_endpoint_gives_the_same_ids(model, src, tmp_path):
    import tensorflow as tf

    options = {"strategy": "beam", "beam_size": 4, "max_length": toy.LENGTH + 1}
    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(
        "generate",
        lambda source: model.generate_function(options)(source).ids,
        input_signature=[tf.TensorSpec((None, None), tf.int32)],
    )
    archive.write_out(str(tmp_path / "export"), verbose=False)
    served = tf.saved_model.load(str(tmp_path / "export"))
    np.testing.assert_array_equal(
        served.generate(tf.constant(src)).numpy(),
        numpy(model.generate(src, **options).ids),
    )


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda m, s: m.generate(s, end_id=toy.VOCAB),
            "`end_id` must be a token of the step's vocabulary, in [0, 12): "
            "outside it, no row would ever end. Received: end_id=12",
        ),
        (
            lambda m, s: m.generate(s, stop_ids=[3, 40]),
            "`stop_ids` must be a token of the step's vocabulary, in [0, 12): "
            "outside it, no row would ever end. Received: stop_ids=40",
        ),
        (
            lambda m, s: m.generate(s, strategy="top_k"),
            "`strategy` must be one of ['beam', 'greedy', 'sampling']. "
            "Received: strategy='top_k'",
        ),
        (
            lambda m, s: m.generate(s, beam_size=3),
            "`beam_size` is no argument of strategy='greedy', which takes "
            "['banned_ids', 'check_log_probs', 'drop_finished', 'min_length', "
            "'no_repeat_ngram_size', 'processors', 'stop_ids']. Received: "
            "beam_size=3",
        ),
    ],
    ids=["end_id", "stop_ids", "strategy", "option"],
)
def test_each_mistake_is_refused_in_one_line(model, src, call, message):
    with pytest.raises(ValueError) as e:
        call(model, src)
    assert one_line(e) == message


def test_a_decoder_needs_a_cell_over_a_memory():
    cell = ka.AttentionCellWrapper(
        keras.layers.GRUCell(4), ka.DotAttention(), style="self", max_length=3
    )
    with pytest.raises(ValueError, match=r"^`cell` must be an AttentionCellWrapper"):
        ka.AttentionDecoder(keras.layers.Embedding(5, 4), cell, keras.layers.Dense(5))


def test_a_memory_mask_of_none_may_be_given_by_position():
    # Keras fills a None `memory_mask` from the memory by keyword; given by
    # position it must not collide.
    def fresh():
        keras.utils.set_random_seed(4)
        return ka.AttentionDecoder(
            keras.layers.Embedding(12, 8),
            ka.BahdanauAttentionCell(keras.layers.GRUCell(8), ka.BahdanauAttention(8)),
            keras.layers.Dense(12),
        )

    memory = np.random.default_rng(0).random((2, 5, 8), dtype="float32")
    state = np.zeros((2, 8), "float32")
    ids = np.array([[1, 4], [1, 5]], "int32")
    by_keyword = numpy(fresh()(ids, memory, initial_state=[state]))
    np.testing.assert_allclose(numpy(fresh()(ids, memory, None, [state])), by_keyword)
    options = dict(start_id=1, end_id=2, max_length=4)
    generated = fresh().generate(memory, None, [state], **options)
    expected = fresh().generate(memory, initial_state=[state], **options)
    np.testing.assert_array_equal(numpy(generated.ids), numpy(expected.ids))
    with pytest.raises(TypeError, match="Received: 7"):
        fresh()(ids, memory, None, [state], False, None, 0)
