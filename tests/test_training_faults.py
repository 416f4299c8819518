"""Training's README promises: Ctrl-C and resume, an ensemble killed in its
second member (and its export), `--word-dropout`, TensorBoard logs.

The interrupted runs are real `train.py` processes sent a real SIGINT or
SIGKILL; the same command then resumes in the test's process (what goes to
the export recorded), judged by the intervals Keras prints ("Epoch i/n", a
validation interval each), which start after the validations the backup
holds.
"""

import pytest

pytestmark = pytest.mark.tf_only

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from e2e import ROOT, train_command, write_org_data  # noqa: E402

from models.model.ensemble import SummarizerEnsemble  # noqa: E402
from models.settings.fit import TrainOptions  # noqa: E402
from models.settings.model import SummarizerConfig  # noqa: E402
from models.training.fit import build_model  # noqa: E402

INTERVAL_LINE = re.compile(r"^Epoch (\d+)/(\d+)$", re.MULTILINE)


def _backed_up_validations(run_dir):
    try:
        return json.loads((run_dir / "backup" / "training_metadata.json").read_text())[
            "epoch"
        ]
    except (OSError, ValueError, KeyError):
        return -1


def _interrupt(command, run_dir, validations_done, sig, log):
    """Runs `command`; sends `sig` once `run_dir` has `validations_done`
    validations backed up. Returns `(exit code, validations backed up,
    stderr)`."""
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "PYTHONUNBUFFERED": "1"}
    with open(log, "w") as out:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            # pytest-xdist's workers ignore SIGINT, and an ignored signal is
            # inherited: train.py must get it as a terminal's Ctrl-C would.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        deadline = time.monotonic() + 300
        while (
            time.monotonic() < deadline
            and process.poll() is None
            and _backed_up_validations(run_dir) < validations_done
        ):
            time.sleep(0.05)
        assert process.poll() is None, f"training exited early: {process.returncode}"
        process.send_signal(sig)
        _, err = process.communicate(timeout=300)
    return process.returncode, _backed_up_validations(run_dir), err


def _intervals(stdout):
    return [(int(a), int(b)) for a, b in INTERVAL_LINE.findall(stdout)]


def _max_validations(run_dir):
    return json.loads((run_dir / "schedule.json").read_text())["max_validations"]


# No decoding for ROUGE at each validation (each process would trace a
# search): the resumes are judged by the intervals and the backups, not by
# scores. 48 pairs: a pass of 6 batches of 8; a validation every 2 batches.
SHORT = [
    *("--validate-every", "16", "--checkpoint-every", "1000", "--skip-eval"),
    *("--validation-rouge-examples", "0"),
]


@pytest.mark.slow
def test_ctrl_c_then_the_same_command_resumes(tmp_path, capsys, monkeypatch):
    import train  # the checkout's command line, from the repository root
    from models import pipeline

    write_org_data(tmp_path / "data")
    # Two intervals of 60 batches (ten passes), long enough that the SIGINT
    # lands in the second, not after it.
    long = ["--validate-every", "480", "--train-examples", "960", *SHORT[2:]]
    command = train_command(tmp_path, *long)
    code, done, err = _interrupt(
        command, tmp_path / "run", 1, signal.SIGINT, tmp_path / "first.log"
    )
    assert code == 130, err[-3000:]
    assert "train.py: interrupted; run the same command again to resume." in err
    assert "Traceback" not in err
    assert done == 1 and _max_validations(tmp_path / "run") == 2
    assert not (tmp_path / "export").exists()

    # Resumed here: the model that goes to the export is recorded (the
    # export after a resume is test_pipeline.py's resume test's).
    exported = []

    def export(model, *args, **kwargs):
        exported.append(model)
        folder = tmp_path / "recorded-export"
        folder.mkdir(exist_ok=True)
        return folder

    monkeypatch.setattr(pipeline, "export", export)
    capsys.readouterr()
    assert train.main(command[2:]) == 0
    out, err = capsys.readouterr()
    assert "Resuming run" in err
    # One interval trained, the one after the backup's.
    assert _intervals(out) == [(2, 2)]
    assert _backed_up_validations(tmp_path / "run") == 2
    # The trained model, as the run saved it, goes to the export.
    (model,) = exported
    saved = _weights(tmp_path / "run" / "model.keras")
    for got, want in zip(model.weights, saved, strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.slow
def test_an_ensemble_killed_in_its_second_member_resumes_that_member(tmp_path, capsys):
    """Killed in member 2, the same command trains only what is left of it;
    the export is the mean of both members, and `models.export.saved_model --members 1`
    exports the first alone."""
    import train  # the checkout's command line, from the repository root
    from models.model.run_folder import load_trained_model

    write_org_data(tmp_path / "data")
    command = train_command(
        tmp_path, "--train-examples", "64", "--ensemble", "2", *SHORT
    )
    run_dir, second = tmp_path / "run", tmp_path / "run" / "member-1"
    code, done, err = _interrupt(
        command, second, 1, signal.SIGKILL, tmp_path / "first.log"
    )
    assert code == -signal.SIGKILL
    assert "[train.py] member 2/2: training" in err
    last = _max_validations(run_dir)
    assert last == 4 and 1 <= done < last
    assert (run_dir / "model.keras").is_file()  # the first, finished
    assert not (second / "model.keras").exists()
    first_member = [np.asarray(w) for w in _weights(run_dir / "model.keras")]

    # The same command again, here.
    capsys.readouterr()
    assert train.main(command[2:]) == 0
    # The first member has all its validations: none trained again. The
    # second goes on from its backup.
    assert _intervals(capsys.readouterr().out) == [
        (v, last) for v in range(done + 1, last + 1)
    ]
    # Loaded as it was saved.
    for got, want in zip(_weights(run_dir / "model.keras"), first_member, strict=True):
        np.testing.assert_array_equal(np.asarray(got), want)
    # The run, as `models.export.saved_model` loads it, and the export hold both
    # members: the first as it was, the second as resumed and saved.
    version = tmp_path / "export" / "1"
    exported = [
        keras.saving.load_model(version / name, compile=False)
        for name in ("model.keras", "member-1.keras")
    ]
    loaded = load_trained_model(run_dir)
    assert isinstance(loaded, SummarizerEnsemble)
    saved = (first_member, [np.asarray(w) for w in _weights(second / "model.keras")])
    for members in (loaded.members, exported):
        for member, weights in zip(members, saved, strict=True):
            for got, want in zip(member.weights, weights, strict=True):
                np.testing.assert_array_equal(np.asarray(got), want)
    _assert_ensemble_export(run_dir, version, exported, tmp_path / "one")


def _assert_ensemble_export(run_dir, version, members, one_dir):
    """`version` decodes with the mean of its two `members`; `--members 1`
    exports the first alone."""
    from models.decoding.headline_module import HeadlineModule
    from models.export import saved_model as export
    from models.model.run_folder import load_run
    from models.settings.search import SearchOptions

    _, features = load_run(run_dir)
    options = SearchOptions(**json.loads((version / "search_options.json").read_text()))
    docs = tf.constant(["w1 w2 w3 corp. said w4", "w5 w6 w7 w8 w9 w10"])
    ensemble = HeadlineModule(SummarizerEnsemble(members), features, options)
    saved = tf.saved_model.load(str(version))
    for signature, beam in (("greedy", 1), ("serving_default", options.beam_size)):
        _assert_same_headlines(
            saved.signatures[signature](documents=docs), ensemble.search(docs, beam)
        )

    export.main(
        ["--run-dir", str(run_dir), "--export-dir", str(one_dir), "--members", "1"]
        + ["--search-options", str(version / "search_options.json")]
    )
    single = one_dir / "1"
    assert not (single / "member-1.keras").exists()
    alone = HeadlineModule(members[0], features, options).search(docs, 1)
    out = tf.saved_model.load(str(single)).signatures["greedy"](documents=docs)
    _assert_same_headlines(out, alone)
    with pytest.raises(SystemExit, match="Received: members=0"):
        export.main(["--run-dir", str(run_dir), "--export-dir", "x", "--members", "0"])
    # An n-best list longer than the beam: a one-line error.
    with pytest.raises(SystemExit, match=r"beam_size=\d+\]\. Received: n_best=9"):
        export.main(["--run-dir", str(run_dir), "--export-dir", "x", "--n-best", "9"])
    (one_dir.parent / "bad.json").write_text('{"beam": 3}')
    for bad in (one_dir.parent / "bad.json", one_dir.parent / "missing.json"):
        with pytest.raises(SystemExit, match=r"Received: search_options='.*json'"):
            export.main(
                ["--run-dir", str(run_dir), "--export-dir", "x"]
                + ["--search-options", str(bad)]
            )


def _assert_same_headlines(out, expected):
    assert out["headlines"].numpy().tolist() == expected["headlines"].numpy().tolist()
    np.testing.assert_allclose(
        out["scores"].numpy(), expected["scores"].numpy(), atol=1e-5
    )


def _weights(path):
    return keras.saving.load_model(path, compile=False).weights


def test_word_dropout_drops_whole_words_in_training_only():
    import train  # the checkout's command line, from the repository root

    settings = train.parse_settings(["--word-dropout", "0.5", "--vocab-size", "60"])
    config = settings.model
    assert config.word_dropout == 0.5
    settled = {
        "max_source_length": 40,
        "max_target_length": 8,
        "normalization": "general",
    }
    config = SummarizerConfig(
        **{**config.to_dict(), "embedding_dim": 8, "hidden_size": 8, **settled}
    )
    model = build_model(config, TrainOptions())
    embedded = np.random.default_rng(0).normal(size=(64, 40, 8)).astype("float32")
    for layer in (model.source_word_dropout, model.target_word_dropout):
        keras.utils.set_random_seed(0)
        out = np.asarray(layer(tf.constant(embedded), training=True))
        dropped = np.all(out == 0, axis=-1)
        # Whole words: a word's vector is all zero or all of it scaled by
        # 1 / (1 - 0.5), never part of it.
        assert np.array_equal((out == 0).any(axis=-1), dropped)
        np.testing.assert_allclose(out[~dropped], 2.0 * embedded[~dropped], rtol=1e-6)
        # 2,560 words at rate 0.5: +-0.05 is 5 standard deviations.
        assert 0.45 < dropped.mean() < 0.55
        np.testing.assert_array_equal(
            np.asarray(layer(tf.constant(embedded), training=False)), embedded
        )


def _scalars(folder):
    """tag -> [(step, value)] of the event files in `folder`."""
    found = {}
    for path in sorted(folder.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                number = float(tf.make_ndarray(value.tensor))
                found.setdefault(value.tag, []).append((event.step, number))
    return found


@pytest.mark.slow
def test_tensorboard_event_files_are_written_and_readable(trained):
    folder, result = trained
    logs = folder / "run" / "logs"
    train_scalars = _scalars(logs / "train")
    validation = _scalars(logs / "validation")
    rouge = _scalars(logs / "rouge")
    # Two validations: steps 0 and 1 of each per-interval scalar.
    assert [s for s, _ in train_scalars["epoch_loss"]] == [0, 1]
    # The validation loss is the one Keras printed (4 decimals).
    printed = [float(v) for v in re.findall(r"val_loss: ([0-9.]+)", result.stdout)]
    logged = [v for _, v in validation["epoch_loss"]]
    assert [s for s, _ in validation["epoch_loss"]] == [0, 1]
    assert printed == pytest.approx(logged, abs=5e-5)
    # And the validation ROUGE that ValidationRouge printed (1 decimal).
    lines = re.findall(
        r"validation ROUGE-1/2/L on \d+ examples: ([0-9.]+)", result.stdout
    )
    assert [s for s, _ in rouge["val_rouge1"]] == [0, 1]
    assert [float(v) for v in lines] == pytest.approx(
        [v for _, v in rouge["val_rouge1"]], abs=0.051
    )
