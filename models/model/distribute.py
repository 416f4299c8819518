"""Whether training runs on several machines (workers) in step."""


def in_multi_worker_mode(strategy):
    """Whether `strategy` spans more than one worker (None: one process).

    TensorFlow has no public way to ask this: a
    `MultiWorkerMirroredStrategy` given a single-worker cluster (no
    `TF_CONFIG`) runs like a local one, so its type does not tell. Keras asks
    the same private method (`strategy.extended._in_multi_worker_mode()`, in
    `keras/src/backend/tensorflow/trainer.py`) before it reduces a step's
    logs across workers; this is the one place `models/` calls it.
    """
    return strategy is not None and strategy.extended._in_multi_worker_mode()
