"""`jnp.square` against a product in the gradient of a `lax.scan`, pure JAX.

The EntNet memory's update (`keras_attn.EntityMemoryCell`: gates, PReLU
candidate, normalisation) written directly in JAX over a story of
`--steps` sentences, batch 32, 20 slots of 100; the gradient of a sum of the
final memory with respect to every weight, jitted. The two programs differ
only in the normalisation's `sum(x**2)`: `jnp.square(x)` (`integer_pow`, what
`keras.ops.square` is on JAX) or `x * x`. They are timed in one process,
interleaved, in CPU milliseconds per gradient.

```
python -m benchmarks.square_in_scan
```
"""

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np


def memory_loss(weights, sentences, square):
    keys, u, v, w, alpha = weights
    batch = sentences.shape[0]

    def step(slots, sentence):
        gates = jax.nn.sigmoid(
            jnp.einsum("bd,bnd->bn", sentence, slots) + sentence @ keys.T
        )
        pre = slots @ u + (keys @ v)[None] + (sentence @ w)[:, None, :]
        slots = slots + gates[..., None] * (
            jnp.maximum(pre, 0.0) + alpha * jnp.minimum(pre, 0.0)
        )
        squared = jnp.square(slots) if square else slots * slots
        norm = jnp.maximum(jnp.sum(squared, -1, keepdims=True), 1e-12)
        return slots * jax.lax.rsqrt(norm), None

    start = jnp.broadcast_to(keys, (batch, *keys.shape))
    slots, _ = jax.lax.scan(step, start, jnp.swapaxes(sentences, 0, 1))
    return jnp.sum(slots)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=18)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--number", type=int, default=30)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    sentences = jnp.asarray(rng.normal(size=(32, args.steps, 100)), jnp.float32)
    shapes = [(20, 100), (100, 100), (100, 100), (100, 100)]
    weights = [jnp.asarray(rng.normal(size=s) * 0.1, jnp.float32) for s in shapes]
    weights.append(jnp.ones(100, jnp.float32))
    programs = {
        name: jax.jit(jax.grad(lambda w, x, sq=square: memory_loss(w, x, sq)))
        for name, square in (("square", True), ("product", False))
    }
    for grad in programs.values():
        jax.block_until_ready(grad(weights, sentences))
    times = {name: [] for name in programs}
    for _ in range(args.repeats):
        for name, grad in programs.items():
            start = time.process_time()
            for _ in range(args.number):
                jax.block_until_ready(grad(weights, sentences))
            times[name].append((time.process_time() - start) / args.number * 1e3)
    print(json.dumps({"cpu_ms_per_gradient": times}, indent=2))


if __name__ == "__main__":
    main()
