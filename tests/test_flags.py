"""README flags of `train.py`, one small run each (tiny data, a few steps).

`--attention`: every score but the default (tested end to end in
test_pipeline.py) trains a step and decodes. `--coverage --no-copy --cell gru
--attention bahdanau-normalized --max-train-minutes` in one run that exports,
and that run shows the test split is never read for any choice.
"""

import pytest

pytestmark = [pytest.mark.tf_only, pytest.mark.slow]

import json  # noqa: E402

import h5py  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from e2e import train_command, write_org_data  # noqa: E402

import keras_attn  # noqa: E402
from models import data  # noqa: E402
from models.decoding.headline_module import HeadlineModule  # noqa: E402
from models.settings.fit import TrainOptions  # noqa: E402
from models.settings.model import SummarizerConfig  # noqa: E402
from models.settings.search import SearchOptions  # noqa: E402
from models.text.features import RESERVED, TextFeatures  # noqa: E402
from models.training import fit as training  # noqa: E402
from models.training.schedule import Schedule  # noqa: E402

WORDS = ["alpha", "beta", "gamma", "delta", "said", "."]
LAYERS = {
    "luong-dot": (keras_attn.DotAttention, {"use_scale": False}),
    "luong-scale": (keras_attn.DotAttention, {"use_scale": True}),
    "luong-general": (keras_attn.GeneralAttention, {}),
    "luong-concat": (keras_attn.ConcatAttention, {}),
    "scaled-dot": (keras_attn.ScaledDotAttention, {}),
}


@pytest.mark.parametrize("attention", sorted(LAYERS))
def test_attention_flag_trains_and_decodes(attention):
    # Dot scores need query and key of one size: hidden 8, encoder 2 x 4.
    config = SummarizerConfig(
        vocab_size=len(RESERVED) + len(WORDS),
        embedding_dim=8,
        hidden_size=8,
        attention_units=4,
        attention=attention,
        max_source_length=8,
        max_target_length=4,
    )
    features = TextFeatures([*RESERVED, *WORDS], 8, 4)
    model = training.build_model(config, TrainOptions())
    cls, settings = LAYERS[attention]
    assert type(model.attention) is cls
    for name, value in settings.items():
        assert getattr(model.attention, name) == value

    documents = tf.constant(["alpha beta zorg said .", "gamma delta ."])
    source = features.encode_source(documents)
    target = features.encode_target(tf.constant(["alpha zorg", "gamma"]), source)
    inputs = {
        "source_ids": source["ids"],
        "source_ext_ids": source["ext_ids"],
        "target_in": target["target_in"],
    }
    before = [np.array(w) for w in model.attention.weights]
    losses = [
        float(model.train_on_batch(inputs, target["target_out"])) for _ in range(2)
    ]
    assert np.all(np.isfinite(losses))
    # The score's own weights (if any) get gradients.
    for old, new in zip(before, model.attention.weights, strict=True):
        assert not np.allclose(old, np.array(new))
    out = HeadlineModule(model, features, SearchOptions(max_length=3)).search(
        documents, 1
    )
    tokens, log_probs = _greedy_by_hand(model, source, steps=3)
    assert [h.decode() for h in out["normalized_headlines"].numpy()] == tokens
    np.testing.assert_allclose(out["scores"].numpy(), log_probs, rtol=1e-5)
    assert out["attention"].shape[:2] == (2, 3)


def _greedy_by_hand(model, source, steps):
    """Greedy headlines of `steps` tokens, one `model.step` and argmax a step.

    `SearchOptions`' default minimum (3) bans the end token for all `steps`;
    padding and the start token are always banned, and no 3-gram can repeat
    in 3 tokens. Returns the headlines (words, space-joined) and the summed
    log-probabilities.
    """
    state, memory = model.initial_decoder_state(source["ids"], source["ext_ids"])
    ids = np.full(len(source["ids"]), RESERVED.index("<s>"), np.int32)
    vocabulary = [*RESERVED, *WORDS]
    words, total = [[] for _ in ids], np.zeros(len(ids))
    for _ in range(steps):
        log_probs, state, _ = model.step(tf.constant(ids), state, memory)
        log_probs = np.array(log_probs)
        log_probs[:, [RESERVED.index(t) for t in ("<pad>", "<s>", "</s>")]] = -np.inf
        ids = log_probs.argmax(axis=1).astype(np.int32)
        total += log_probs[np.arange(len(ids)), ids]
        for row, i in enumerate(ids):
            # An id past the vocabulary copies that source position.
            tokens = source["tokens"].numpy()[row]
            word = vocabulary[i] if i < len(vocabulary) else tokens[i - len(vocabulary)]
            words[row].append(word if isinstance(word, str) else word.decode())
    return [" ".join(w) for w in words], total


def test_coverage_no_copy_gru_validation_cap_export(tmp_path, monkeypatch, capsys):
    write_org_data(tmp_path / "data", sizes=(48, 8, 8))
    splits, models = [], []
    real_load, real_fit = data.load_split, training.fit

    def load_split(split, source):
        splits.append(split)
        return real_load(split, source)

    def fit(model, *args, **kwargs):
        models.append(model)
        return real_fit(model, *args, **kwargs)

    monkeypatch.setattr(data, "load_split", load_split)
    monkeypatch.setattr(training, "fit", fit)
    argv = train_command(
        tmp_path,
        "--coverage",
        "--no-copy",
        "--cell",
        "gru",
        "--attention",
        "bahdanau-normalized",
        # Member 1 trains its one validation, a pass of 8 batches; the cap
        # leaves member 2 unstarted.
        "--validate-every",
        "48",
        "--train-examples",
        "48",
        "--stop-after-validations",
        "1",
        "--ensemble",
        "2",
        "--tune-decoding",
        "--tune-examples",
        "4",
        "--tune-length-penalties",
        "1.0",
        "--tune-ngram-sizes",
        "0",
        "--tune-end-penalties",  # none: greedy keeps --greedy-end-penalty
        "--skip-eval",
    )[2:]
    code = training_main(argv)
    err = capsys.readouterr().err
    assert code == 0, err[-3000:]
    # Training, tuning and export read train and validation only.
    assert set(splits) == {"train", "validation"}
    # The cap stopped the command after member 1, which alone is served.
    [model] = models
    assert "member 2 is unfinished (0 validations, 0 examples)" in err
    assert not (tmp_path / "run" / "member-1").exists()
    schedule = json.loads((tmp_path / "run" / "schedule.json").read_text())
    assert schedule["interval_batches"] == schedule["pass_batches"] == 8
    assert int(model.optimizer.iterations) == 8
    assert sorted(p.name for p in (tmp_path / "export" / "1").glob("*.keras")) == [
        "model.keras"
    ]
    assert isinstance(model.attention, keras_attn.CoverageAttention)
    assert model.attention.normalize

    version = tmp_path / "export" / "1"
    config = json.loads((version / "config.json").read_text())
    assert (config["coverage"], config["copy"], config["cell"]) == (True, False, "gru")
    assert config["attention"] == "bahdanau-normalized"
    loaded = tf.saved_model.load(str(version))
    docs = tf.constant(["w1 w2 w3 corp. said", "w4 w5 ."])
    out = loaded.signatures["greedy"](documents=docs)
    reloaded = keras.saving.load_model(version / "model.keras", compile=False)
    assert isinstance(reloaded.attention, keras_attn.CoverageAttention)
    # The export decodes what a search of the saved model decodes.
    from models.model.run_folder import load_run

    _, features = load_run(tmp_path / "run")
    options = SearchOptions(**json.loads((version / "search_options.json").read_text()))
    expected = HeadlineModule(reloaded, features, options).search(docs, 1)
    for key in ("headlines", "normalized_headlines"):
        assert out[key].numpy().tolist() == expected[key].numpy().tolist()
    np.testing.assert_allclose(
        out["scores"].numpy(), expected["scores"].numpy(), atol=1e-5
    )


def training_main(argv):
    import train

    return train.main(argv)


class _ScriptedRouge(training.ValidationRouge):
    """Reports a fixed validation ROUGE-1 per validation; records the weights."""

    def __init__(self, scores):
        keras.callbacks.Callback.__init__(self)
        self.scores = scores
        self.weights = []

    def on_epoch_end(self, epoch, logs=None):
        logs["val_rouge1"] = self.scores[epoch]
        self.weights.append([np.array(w) for w in self.model.weights])


def _scripted_fit(tmp_path, scores, validations, **options):
    """`training.fit` of a linear model, with `scores` as validation ROUGE-1,
    on a schedule of at most `validations` validations of one pass (two
    batches of 8) each, and `options` (`TrainOptions`).

    Returns the model, the `_ScriptedRouge` and the history.
    """
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 3)).astype("float32")
    y = rng.normal(size=(16, 1)).astype("float32")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(0.1), "mse")
    batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    rouge = _ScriptedRouge(scores)
    options = TrainOptions(
        batch_size=8,
        validate_every=16,
        train_examples=16 * validations,
        **{"min_train_examples": 0, **options},
    )
    schedule = Schedule.make(options, pass_batches=2)
    history = training.fit(
        model,
        batches.repeat(),
        batches,
        tmp_path,
        options,
        [rouge],
        schedule=schedule,
    )
    return model, rouge, history.history


def test_early_stopping_and_best_model_follow_validation_rouge(tmp_path):
    # Best at validation 2 (index 1); patience 2: validations 3 and 4 do not
    # improve, so training stops before the better validations 5 and 6.
    model, rouge, history = _scripted_fit(
        tmp_path,
        [10.0, 30.0, 20.0, 25.0, 40.0, 50.0],
        validations=6,
        patience=2,
        checkpoint_every=1000,
    )
    assert len(history["loss"]) == 4
    assert history["val_rouge1"] == [10.0, 30.0, 20.0, 25.0]
    # The model ends with the weights of the best validation, not the last.
    for got, want in zip(model.weights, rouge.weights[1], strict=True):
        np.testing.assert_array_equal(np.array(got), want)
    assert not np.array_equal(rouge.weights[1][0], rouge.weights[3][0])


def test_early_stopping_waits_for_the_minimum_examples(tmp_path):
    # Best at validation 2; patience 2 would stop at 4, but 96 examples are
    # 6 validations of 16: the stop waits until 6. The best is counted from
    # the first validation on: validation 2's weights are kept, not the
    # best since the minimum.
    scores = [10.0, 30.0, 20.0, 20.0, 25.0, 20.0, 50.0, 60.0]
    model, rouge, history = _scripted_fit(
        tmp_path, scores, 8, patience=2, min_train_examples=96
    )
    assert history["val_rouge1"] == scores[:6]
    for got, want in zip(model.weights, rouge.weights[1], strict=True):
        np.testing.assert_array_equal(np.array(got), want)
    # Without the minimum, at 4.
    _, _, history = _scripted_fit(tmp_path / "none", scores, 8, patience=2)
    assert history["val_rouge1"] == scores[:4]


def _learning_rates(tmp_path, validations, scores):
    """Each validation's learning rate, as the logs show it (before any decay)."""
    options = dict(patience=10, lr_decay=0.5, lr_decay_patience=2)
    _, _, history = _scripted_fit(tmp_path, scores, validations, **options)
    return history["learning_rate"]


def _backed_up_learning_rate(run_dir):
    # Keras' optimizer variables: the step count, then the learning rate.
    with h5py.File(run_dir / "backup" / "latest.weights.h5", "r") as f:
        return float(f["optimizer"]["vars"]["1"][()])


def test_the_learning_rate_decays_at_a_plateau_and_a_resume_keeps_it(tmp_path):
    # Best at validation 2; 3 and 4 do not improve: halved after 4.
    # Validation 5 does not improve either; the run stops there.
    scores = [10.0, 20.0, 20.0, 20.0, 20.0, 20.0]
    rates = _learning_rates(tmp_path, 5, scores)
    assert rates == pytest.approx([0.1, 0.1, 0.1, 0.1, 0.05])
    # A fresh model and optimizer resume from the backup: the halved rate,
    # and the validation already waited, so that validation 6 halves it again.
    assert _learning_rates(tmp_path, 6, scores) == pytest.approx([0.05])
    assert _backed_up_learning_rate(tmp_path) == pytest.approx(0.025)
    # Resumed without the decay: the rate stays where the backup left it.
    _scripted_fit(tmp_path, [*scores, 20.0], 7, patience=10)
    assert _backed_up_learning_rate(tmp_path) == pytest.approx(0.025)
    with pytest.raises(ValueError, match=r"Received: lr_decay=1.5"):
        TrainOptions(lr_decay=1.5)
