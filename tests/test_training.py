"""Training's callbacks: the moving average of the weights (validated and
kept, never trained on), Ctrl-C taken between two steps, and backups whose
callback state always matches the validations they record."""

import json
import os
import signal

import keras
import numpy as np
import pytest

pytestmark = pytest.mark.tf_only

from models.training.callbacks import Backup, InterruptBetweenSteps  # noqa: E402
from models.training.fit import AveragedWeights  # noqa: E402


def _weights(model):
    return [np.array(w) for w in model.get_weights()]


def test_validation_sees_the_average_and_training_goes_on_from_the_raw_weights(rng):
    x = rng.normal(size=(32, 3)).astype("float32")
    y = x @ np.array([[1.0], [-2.0], [0.5]], "float32")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    optimizer = keras.optimizers.Adam(0.1, use_ema=True, ema_momentum=0.9)
    model.compile(optimizer, "mse")
    seen = {"test": [], "epoch_end": [], "average": [], "raw_end": [], "raw_begin": []}

    class Probe(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if batch == 0:
                seen["raw_begin"].append(_weights(model))

        def on_train_batch_end(self, batch, logs=None):
            if batch == 3:  # the epoch's last batch (32 / 8)
                seen["raw_end"].append(_weights(model))

        def on_test_begin(self, logs=None):
            seen["test"].append(_weights(model))

        def on_epoch_end(self, epoch, logs=None):
            seen["epoch_end"].append(_weights(model))
            seen["average"].append(
                [np.array(v) for v in optimizer._model_variables_moving_average]
            )

    averaged = AveragedWeights()
    model.fit(
        x,
        y,
        batch_size=8,
        epochs=2,
        validation_data=(x, y),
        callbacks=[averaged, Probe(), averaged.restorer()],
        verbose=0,
        shuffle=False,
    )
    for epoch in range(2):
        average = seen["average"][epoch]
        # Not the same weights: otherwise this test could not fail.
        assert not np.allclose(average[0], seen["raw_end"][epoch][0])
        for got in (seen["test"][epoch], seen["epoch_end"][epoch]):
            for g, a in zip(got, average, strict=True):
                np.testing.assert_array_equal(g, a)
    # The second epoch starts from the raw weights the first one ended with.
    for g, r in zip(seen["raw_begin"][1], seen["raw_end"][0], strict=True):
        np.testing.assert_array_equal(g, r)


def _fit_with_ctrl_c(presses, handler=signal.default_int_handler):
    """Fits 6 steps of one example each, with `presses` SIGINTs sent to this
    process at the start of step 3 (index 2), under `handler`.

    Returns `(steps done, raised KeyboardInterrupt, handler after)`.
    """
    previous = signal.signal(signal.SIGINT, handler)
    try:
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        model.compile("sgd", "mse")

        class CtrlC(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                if batch == 2:
                    for _ in range(presses):
                        os.kill(os.getpid(), signal.SIGINT)

        interrupt = InterruptBetweenSteps()
        x = np.ones((6, 2), "float32")
        try:
            with interrupt.deferring():
                model.fit(
                    x, x[:, :1], batch_size=1, callbacks=[CtrlC(), interrupt], verbose=0
                )
            raised = False
        except KeyboardInterrupt:
            raised = True
        return int(model.optimizer.iterations), raised, signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_in_fit_is_taken_at_the_end_of_the_step_it_lands_in():
    # Sent before step 3 runs: step 3 still runs to its end, step 4 never.
    steps, raised, after = _fit_with_ctrl_c(presses=1)
    assert (steps, raised) == (3, True)
    assert after is signal.default_int_handler


def test_a_second_ctrl_c_interrupts_at_once():
    steps, raised, after = _fit_with_ctrl_c(presses=2)
    assert (steps, raised) == (2, True)
    assert after is signal.default_int_handler


def test_an_ignored_sigint_stays_ignored():
    # A background job (or pytest-xdist's worker) ignores SIGINT: so does fit.
    steps, raised, after = _fit_with_ctrl_c(presses=1, handler=signal.SIG_IGN)
    assert (steps, raised) == (6, False)
    assert after is signal.SIG_IGN


class _Killed(Exception):
    """Stands for a kill -9 in the middle of a backup."""


# Validation scores: the best of the first validation is 20, of two 35.
SCORES = [20.0, 35.0, 30.0]


def _stopping():
    return keras.callbacks.EarlyStopping(monitor="score", mode="max", patience=9)


def _fit_with_backup(backup_dir, epochs, stopping, save_freq="epoch", probe=None):
    """Fits a tiny model for `epochs` validations (4 steps each), scored by
    `SCORES`, with `stopping` tracked by a `Backup` in `backup_dir`."""
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")

    class Score(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            logs["score"] = SCORES[epoch]

    callbacks = [Score(), stopping, Backup(str(backup_dir), save_freq, [stopping])]
    x = np.ones((8, 2), "float32")
    model.fit(
        x,
        x[:, :1],
        batch_size=2,
        epochs=epochs,
        callbacks=[*callbacks, *([probe] if probe else [])],
        verbose=0,
    )


@pytest.mark.parametrize("kill", ["before_keras_records", "after_keras_records"])
def test_a_backup_killed_midway_restores_the_state_of_the_validations_it_records(
    tmp_path, monkeypatch, kill
):
    _fit_with_backup(tmp_path / "backup", 1, _stopping())
    keras_save = keras.callbacks.BackupAndRestore._save_model

    def killed_save(self):
        if kill == "after_keras_records":
            keras_save(self)
        raise _Killed

    monkeypatch.setattr(keras.callbacks.BackupAndRestore, "_save_model", killed_save)
    with pytest.raises(_Killed):
        _fit_with_backup(tmp_path / "backup", 2, _stopping())
    monkeypatch.undo()

    metadata = json.loads((tmp_path / "backup" / "training_metadata.json").read_text())
    recorded = {"before_keras_records": 1, "after_keras_records": 2}[kill]
    assert metadata["epoch"] == recorded
    # A resumed fit starts after the recorded validations, with their best.
    seen = {}
    stopping = _stopping()

    class Probe(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            seen.setdefault("epoch", epoch)
            seen.setdefault("best", stopping.best)

    _fit_with_backup(tmp_path / "backup", 3, stopping, probe=Probe())
    assert seen == {"epoch": recorded, "best": max(SCORES[:recorded])}


def test_a_resumed_run_records_its_validations_in_backups_within_an_interval(
    tmp_path,
):
    _fit_with_backup(tmp_path / "backup", 1, _stopping())
    recorded = []

    class ReadBackup(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            path = tmp_path / "backup" / "training_metadata.json"
            recorded.append(json.loads(path.read_text())["epoch"])

    # A backup every step: the first ones fall within the second interval.
    stopping = _stopping()
    _fit_with_backup(tmp_path / "backup", 2, stopping, save_freq=1, probe=ReadBackup())
    assert recorded == [1, 1, 1, 1]
    assert stopping.best == max(SCORES[:2])
