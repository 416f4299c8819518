"""Two training steps of a tiny summarizer on JAX, over the devices and
processes this process is started with; process 0 saves the steps' loss
and the weights after them (tests/test_data_parallel.py).

    python tests/data_parallel_step.py FOLDER OUT [COORDINATOR PROCESSES ID]
"""

import sys

BATCH = 8
LENGTH = 16


def main(folder, out, *hosts):
    from models.training import devices

    if hosts:
        devices.start_processes(hosts[0], int(hosts[1]), int(hosts[2]))
    import keras
    import numpy as np

    from models.data.arrays import ArrayBatches, PreparedArrays, source_buckets
    from models.settings.fit import TrainOptions
    from models.settings.model import SummarizerConfig
    from models.training.fit import build_model

    shard = devices.data_parallel(BATCH)
    keras.utils.set_random_seed(0)
    # Dropout and the sampled softmax on: their random draws must not
    # depend on how the batch is split.
    config = SummarizerConfig(
        vocab_size=30,
        embedding_dim=8,
        hidden_size=8,
        attention_units=4,
        max_source_length=LENGTH,
        max_target_length=6,
        sampled_softmax=8,
    )
    options = TrainOptions(
        batch_size=BATCH, learning_rate=0.01, ema_momentum=0, jit_compile=True
    )
    model = build_model(config, options)
    batches = ArrayBatches(
        PreparedArrays(folder), BATCH, source_buckets(LENGTH), LENGTH, shard=shard
    )
    # `fit`, as training does: Keras' data adapter takes the `PyDataset`
    # under the distribution.
    losses = []
    record = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: losses.append(float(logs["loss"]))
    )
    model.fit(
        batches,
        epochs=1,
        steps_per_epoch=2,
        callbacks=[record],
        shuffle=False,
        verbose=0,
    )
    print("devices", len(keras.distribution.list_devices()), "losses", losses)
    if shard[0] == 0:
        weights = {v.path: np.asarray(v.value) for v in model.weights}
        np.savez(out, losses=np.array(losses), **weights)


if __name__ == "__main__":
    main(*sys.argv[1:])
