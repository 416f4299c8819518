"""Whether the bAbI recipe's norm-40 clip binds: gradient norms at the start.

The authors' code sums the batch's loss over its 32 examples and clips the
gradient's global norm at 40; Keras' `clipnorm=40` on a mean loss clips each
variable's gradient at 40. This prints, for the first batches of a task at
initialization, the global and the largest per-variable gradient norm of
the summed loss and of the mean loss (`benchmarks/paper_units.py`,
`--clip`). TensorFlow backend (it takes the gradient with `GradientTape`):

```
KERAS_BACKEND=tensorflow python -m benchmarks.babi_gradient_norms --task 16
```
"""

from __future__ import annotations

import argparse

import keras
import numpy as np

from examples import entity_networks as entnet


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", type=int, default=16)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--data-dir", default=entnet.DEFAULT_DATA_DIR)
    args = parser.parse_args(argv)
    import tensorflow as tf

    data = entnet.load_task(args.data_dir, args.task, seed=0)
    keras.utils.set_random_seed(0)
    model, _ = entnet.build_model(len(data["vocab"]), data["max_words"])
    batches = entnet.LengthBuckets(data["train"], 32, seed=0)
    summed = keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction="sum"
    )
    print("batch | summed: global, largest variable | mean: global, largest variable")
    for i in range(args.batches):
        (stories, questions), answers = batches[i]
        with tf.GradientTape() as tape:
            loss = summed(answers, model([stories, questions]))
        grads = tape.gradient(loss, model.trainable_variables)
        norms = np.array([float(tf.norm(g)) for g in grads if g is not None])
        total, largest, n = np.sqrt((norms**2).sum()), norms.max(), len(answers)
        print(f"{i} | {total:.1f}, {largest:.1f} | {total / n:.2f}, {largest / n:.2f}")


if __name__ == "__main__":
    main()
