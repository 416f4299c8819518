"""Beam search on the reverse toy: by hand and eager, against `generate`.

The toy of benchmarks/toy_reverse.py (a GRU encoder, a
`BahdanauAttentionCell` decoder of 32 units, a vocabulary of 12), untrained:
its rows rarely end, so most run all `max_length = 7` steps. Beam 4 over a
batch of 64 sources, timed two ways on this process's backend:

* `before`: `beam_search` called eagerly over a step written by hand over
  the kept layers (`toy_reverse.hand_written_search`), as decoding was
  written before `AttentionDecoder.generate`;
* `after`: `Seq2SeqModel.generate(source, strategy="beam", beam_size=4)`,
  compiled (`tf.function`; `jax.jit` with the weights passed in;
  `torch.compile` without gradients). Its first call traces and compiles.

Each prints the first call and the median of `--repeats` later ones, in
seconds, as one JSON line:

```
for b in tensorflow jax torch; do
  KERAS_BACKEND=$b python -m benchmarks.bench_generate
done
```
"""

import argparse
import json
import statistics
import time

import keras
import numpy as np
from keras import ops

from benchmarks import toy_reverse as toy


def timed(fn):
    start = time.perf_counter()
    ops.convert_to_numpy(fn().ids)
    return time.perf_counter() - start


def first_and_steady(fn, repeats):
    first = timed(fn)
    return first, statistics.median(timed(fn) for _ in range(repeats))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    model = toy.build_model()
    src = toy.reverse_task(args.batch, np.random.default_rng(0))[0]
    options = {"beam_size": args.beam_size}
    before = first_and_steady(
        lambda: toy.hand_written_search(model, src, "beam", **options), args.repeats
    )
    after = first_and_steady(
        lambda: model.generate(
            src, max_length=toy.LENGTH + 1, strategy="beam", **options
        ),
        args.repeats,
    )
    same = np.array_equal(
        ops.convert_to_numpy(
            toy.hand_written_search(model, src, "beam", **options).ids
        ),
        ops.convert_to_numpy(
            model.generate(
                src, max_length=toy.LENGTH + 1, strategy="beam", **options
            ).ids
        ),
    )
    print(
        json.dumps(
            {
                "backend": keras.backend.backend(),
                "batch": args.batch,
                "beam_size": args.beam_size,
                "before_first_s": round(before[0], 4),
                "before_steady_s": round(before[1], 4),
                "after_first_s": round(after[0], 4),
                "after_steady_s": round(after[1], 4),
                "same_ids": same,
            }
        )
    )


if __name__ == "__main__":
    main()
