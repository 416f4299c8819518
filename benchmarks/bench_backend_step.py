"""One training step and one greedy search of the summarizer's recipe
model on the backend Keras runs on (BENCHMARKS.md, "The summarizer's step
and search on JAX and torch"), which decided that `train.py --backend
torch` is refused:

    KERAS_BACKEND=jax python -m benchmarks.bench_backend_step
    KERAS_BACKEND=torch python -m benchmarks.bench_backend_step
"""

import time

import keras
import numpy as np

from models.decoding.id_search import decode_ids
from models.settings.fit import TrainOptions
from models.settings.model import SummarizerConfig
from models.settings.search import SearchOptions
from models.training.fit import build_model

BATCH, SOURCE, TARGET, VOCAB = 64, 48, 16, 10_000


def _search(model, ids):
    """The greedy search of `ids`, compiled by `jax.jit` on JAX."""

    def search(ids):
        result = decode_ids(
            model,
            ids,
            ids,
            SearchOptions(),
            beam_size=1,
            length_penalty=1.0,
            min_length=0,
        )
        return result.ids

    if keras.backend.backend() != "jax":
        return lambda: search(ids)
    import jax

    variables = list(model.variables)

    @jax.jit
    def stateless(values, ids):
        mapping = list(zip(variables, values, strict=True))
        with keras.StatelessScope(state_mapping=mapping):
            return search(ids)

    return lambda: stateless([v.value for v in variables], ids).block_until_ready()


def main():
    backend = keras.backend.backend()
    config = SummarizerConfig(
        max_source_length=64, max_target_length=TARGET, normalization="gigaword"
    )
    model = build_model(config, TrainOptions(jit_compile=backend == "jax"))
    rng = np.random.default_rng(0)
    source = rng.integers(4, VOCAB, (BATCH, SOURCE)).astype("int32")
    inputs = {
        "source_ids": source,
        "source_ext_ids": source,
        "target_in": rng.integers(4, VOCAB, (BATCH, TARGET)).astype("int32"),
    }
    targets = rng.integers(4, VOCAB, (BATCH, TARGET)).astype("int32")
    model.train_on_batch(inputs, targets)  # compiles on JAX
    seconds = []
    for _ in range(3):
        start = time.perf_counter()
        model.train_on_batch(inputs, targets)
        seconds.append(time.perf_counter() - start)
    print(f"{backend}: training step of {BATCH}, median {np.median(seconds):.2f} s")
    search = _search(model, source)
    search()
    start = time.perf_counter()
    search()
    print(f"{backend}: greedy search of {BATCH}: {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()
