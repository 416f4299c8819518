"""The backend's own transforms of a function: its gradient, its compilation.

For conftest.py's `gradient` and `compiled` fixtures.
"""

import functools

import keras
import numpy as np

BACKEND = keras.backend.backend()


def backend_gradient(fn, *arrays):
    """`[numpy grads]` of a scalar `fn(*tensors)` with respect to each array.

    Differentiates with `tf.GradientTape`, `jax.grad` or `torch.autograd`,
    whichever backend Keras runs on. JAX's is jitted: one compilation costs
    less than compiling every op eagerly.

    Args:
        fn: `fn(*tensors) -> scalar tensor`, in backend ops.
        *arrays: NumPy arrays, one per argument of `fn`.

    Returns:
        A list of NumPy arrays, the gradient for each of `arrays`.
    """
    if BACKEND == "tensorflow":
        import tensorflow as tf

        xs = [tf.constant(a) for a in arrays]
        with tf.GradientTape() as tape:
            for x in xs:
                tape.watch(x)
            y = fn(*xs)
        return [np.asarray(g) for g in tape.gradient(y, xs)]
    if BACKEND == "jax":
        import jax

        grads = jax.jit(jax.grad(fn, argnums=tuple(range(len(arrays)))))(*arrays)
        return [np.asarray(g) for g in grads]
    if BACKEND == "torch":
        import torch

        xs = [torch.tensor(a, requires_grad=True) for a in arrays]
        fn(*xs).backward()
        return [x.grad.detach().cpu().numpy() for x in xs]
    raise NotImplementedError(f"No gradient helper for backend {BACKEND!r}")


def compile_function(fn, **kwargs):
    """`fn` with `kwargs` bound, under `jax.jit` or `tf.function`.

    On torch `fn` runs as it is. On JAX one compilation costs less than
    compiling each op eagerly.

    Args:
        fn: a function of backend tensors.
        **kwargs: arguments bound to `fn` (static under `jax.jit`).

    Returns:
        The compiled function of the remaining arguments.
    """
    fn = functools.partial(fn, **kwargs)
    if BACKEND == "jax":
        import jax

        return jax.jit(fn)
    if BACKEND == "tensorflow":
        import tensorflow as tf

        return tf.function(fn)
    return fn
