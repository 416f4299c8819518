"""The moving average of the weights: validated and kept, never trained on."""

import keras
import numpy as np
import pytest

pytestmark = pytest.mark.tf_only

from models.training import AveragedWeights  # noqa: E402


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
