"""The summarizer's teacher-forced pass agrees with its one-token step."""

import h5py
import keras
import numpy as np
import pytest
from keras import ops
from toy_summarizer import VOCAB, T, tiny_batch, tiny_config

from models.model.summarizer import HeadlineSummarizer
from models.settings.model import SummarizerConfig

pytestmark = pytest.mark.tf_only


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"copy": False},
        {"coverage": True},
        {"tie_embeddings": False, "cell": "gru", "attention": "luong-general"},
        {"encoder_layers": 2},
    ],
)
def test_teacher_forced_log_probs_equal_step_by_step(overrides):
    model = HeadlineSummarizer(tiny_config(**overrides))
    inputs, target = tiny_batch()
    forward = ops.convert_to_numpy(
        model.target_log_probability(model(inputs), inputs, target)
    )
    state, memory = model.initial_decoder_state(
        inputs["source_ids"], inputs["source_ext_ids"]
    )
    for t in range(T):
        log_probs, state, _ = model.step(inputs["target_in"][:, t], state, memory)
        log_probs = ops.convert_to_numpy(log_probs)
        ids = target[:, t]
        if overrides.get("copy") is False:
            # Without copying, an OOV target is scored as <unk> (id 1).
            ids = np.where(ids >= VOCAB, 1, ids)
        expected = np.take_along_axis(log_probs, ids[:, None], -1)[:, 0]
        np.testing.assert_allclose(forward[:, t], expected, atol=2e-5)


@pytest.mark.parametrize(
    "overrides", [{}, {"cell": "gru"}, {"encoder_layers": 2}, {"coverage": True}]
)
def test_the_encoder_by_length_gives_the_same_decoding_state(overrides):
    model = HeadlineSummarizer(tiny_config(**overrides))
    inputs, _ = tiny_batch()
    inputs["source_ids"][2, 3:] = 0  # three lengths: 7, 5, 3
    model(inputs)  # builds it
    args = (inputs["source_ids"], inputs["source_ext_ids"])
    masked = model.initial_decoder_state(*args)
    by_length = model.initial_decoder_state(*args, by_length=True)
    flat = [keras.tree.flatten(x) for x in (masked, by_length)]
    assert len(flat[0]) == len(flat[1])
    for expected, got in zip(*flat, strict=True):
        np.testing.assert_allclose(
            ops.convert_to_numpy(got), ops.convert_to_numpy(expected), atol=1e-6
        )


def test_sampled_softmax_trains_and_leaves_evaluation_exact():
    inputs, target = tiny_batch()
    sampled = HeadlineSummarizer(tiny_config(sampled_softmax=8))
    exact = HeadlineSummarizer(tiny_config())
    sampled(inputs)
    exact(inputs)
    # The seed generator adds a variable: copy the rest by name.
    # The same layers; the sampled model has a seed generator besides.
    for mine, theirs in zip(sampled.layers, exact.layers, strict=True):
        mine.set_weights(theirs.get_weights())
    outputs = sampled(inputs)
    eval_loss = float(sampled.compute_loss(inputs, target, outputs, training=False))
    exact_loss = float(
        exact.compute_loss(inputs, target, exact(inputs), training=False)
    )
    np.testing.assert_allclose(eval_loss, exact_loss, rtol=1e-6)
    train_loss = float(sampled.compute_loss(inputs, target, outputs, training=True))
    assert np.isfinite(train_loss) and abs(train_loss - exact_loss) > 1e-4

    sampled.compile(optimizer=keras.optimizers.Adam(0.02))
    for _ in range(40):
        sampled.train_on_batch(inputs, target)
    trained = float(
        sampled.compute_loss(inputs, target, sampled(inputs), training=False)
    )
    assert trained < 0.75 * exact_loss


def test_stacked_encoder_feeds_each_layer_to_the_next():
    model = HeadlineSummarizer(tiny_config(encoder_layers=3))
    inputs, _ = tiny_batch()
    memory, _, _ = model.encode(inputs["source_ids"])
    assert [layer.name for layer in model.lower_encoders] == ["encoder_0", "encoder_1"]
    # The bottom layer's weights reach the memory through the layers above.
    bottom = model.lower_encoders[0]
    bottom.set_weights([w * 0.5 for w in bottom.get_weights()])
    changed, _, _ = model.encode(inputs["source_ids"])
    assert np.abs(ops.convert_to_numpy(changed - memory)).max() > 1e-4
    with pytest.raises(ValueError, match=r"Received: encoder_layers=0"):
        tiny_config(encoder_layers=0)


def test_label_smoothing_is_the_recipe_and_a_saved_config_keeps_its_value():
    assert SummarizerConfig().label_smoothing == 0.1
    assert SummarizerConfig.from_dict({}).label_smoothing == 0.1
    assert SummarizerConfig.from_dict({"label_smoothing": 0.2}).label_smoothing == 0.2


@pytest.mark.parametrize("overrides", [{}, {"copy": False}, {"tie_embeddings": False}])
def test_label_smoothing_adds_the_cross_entropy_against_uniform(overrides):
    inputs, target = tiny_batch()
    plain = HeadlineSummarizer(tiny_config(**overrides))
    smoothed = HeadlineSummarizer(tiny_config(label_smoothing=0.1, **overrides))
    plain(inputs)
    smoothed(inputs)
    smoothed.set_weights(plain.get_weights())
    outputs = plain(inputs)
    # By hand: the vocabulary's log-softmax, its mean over the words.
    logits = ops.convert_to_numpy(plain.vocabulary_output.logits(outputs["features"]))
    log_softmax = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    uniform = -log_softmax.mean(-1)
    log_z = np.log(np.exp(logits).sum(-1))
    got = ops.convert_to_numpy(plain.uniform_cross_entropy(outputs["features"], log_z))
    np.testing.assert_allclose(got, uniform, rtol=1e-5)
    # The loss: 0.9 of the target's NLL and 0.1 of that, over the tokens.
    nll = -ops.convert_to_numpy(plain.target_log_probability(outputs, inputs, target))
    expected = (0.9 * nll + 0.1 * uniform).mean()  # no padding in the targets
    loss = smoothed.compute_loss(inputs, target, outputs, training=False)
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
    # In training under a sampled softmax, `log Z` is the sampled estimate
    # (`sampled_log_partition`, whose convergence test_sampled_softmax.py
    # checks through `sampled_log_softmax`).
    with pytest.raises(ValueError, match=r"Received: label_smoothing=1"):
        tiny_config(label_smoothing=1.0)


@pytest.mark.parametrize("overrides", [{}, {"copy": False}, {"tie_embeddings": False}])
def test_shortlist_step_renormalises_the_step_over_the_shortlist(overrides):
    model = HeadlineSummarizer(tiny_config(**overrides))
    inputs, _ = tiny_batch()
    model(inputs)  # builds
    source = (inputs["source_ids"], inputs["source_ext_ids"])
    ids = inputs["target_in"][:, 0]

    def step(shortlist):
        state, memory = model.initial_decoder_state(*source, shortlist=shortlist)
        kernel = model.output_kernel(shortlist)
        return ops.convert_to_numpy(model.step(ids, state, memory, kernel)[0])

    exact, whole, k = step(0), step(VOCAB), 10
    np.testing.assert_allclose(whole, exact, atol=2e-5)
    short = step(k)
    source_words = {int(w) for w in inputs["source_ext_ids"].ravel()}
    for b in range(3):
        row_words = set(inputs["source_ext_ids"][b].tolist())
        for w in range(short.shape[1]):
            kept = w < k or w in row_words
            assert np.isfinite(short[b, w]) == (kept and np.isfinite(exact[b, w])), w
        # A word that only the vocabulary gives gains the same factor, 1 / Z.
        generated_only = [w for w in range(4, k) if w not in source_words]
        gain = short[b, generated_only] - exact[b, generated_only]
        np.testing.assert_allclose(gain, gain[0], atol=2e-5)
        assert gain[0] > 0


@pytest.mark.parametrize(
    "overrides", [{}, dict(cell="gru", coverage=True, tie_embeddings=False)]
)
def test_saved_weights_keep_the_layers_paths(overrides, tmp_path):
    # Runs saved before the decoder was keras_attn's load only if every
    # weight stays under the summarizer's own attribute names: none under
    # the decoder composed of them.
    model = HeadlineSummarizer(tiny_config(**overrides))
    model(tiny_batch()[0])
    model.save_weights(tmp_path / "run.weights.h5")
    holders = set()
    with h5py.File(tmp_path / "run.weights.h5") as saved:
        saved.visititems(
            lambda name, item: (
                holders.add(name.split("/")[0])
                if isinstance(item, h5py.Dataset)
                else None
            )
        )
    assert holders == {
        "attention",
        "attentional",
        "bridge",
        "decoder_rnn",
        "embedding",
        "encoder",
        "layers",
    }, holders
