"""A layer's search compiled once per input signature, on every backend.

`CompiledFunction(layer, build)` compiles `build(options)`, a function of
tensors that runs the layer (a search over its step), once for each set of
static options, and caches it:

* TensorFlow: a `tf.function`; it reads the layer's variables when it runs,
  and traces again only for a new input signature.
* JAX: a `jax.jit` of a stateless function that takes the values of the
  layer's variables as arguments (`keras.StatelessScope`), as keras-hub's
  `CausalLM.make_generate_function` does: a jit that closed over the layer
  would bake in the weights it was traced with. Variables the function
  assigns (a `SeedGenerator`'s state) are assigned back after each call.
* torch: `torch.compile` of the function, run under `torch.no_grad()`
  (the searches record no gradients). A new shape may compile again (Keras'
  torch RNNs fix the batch size), up to dynamo's recompile limit, past which
  that code runs eagerly; where torch cannot compile (no C++ compiler), the
  searches run eagerly, with one warning.

The current weights are read at every call on every backend.
"""

import warnings

import keras


def _frozen(value):
    """`value` hashable: lists, tuples and dicts as tuples, recursively."""
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value


class CompiledFunction:
    """`build(options)`'s function of tensors, compiled per backend and cached.

    Args:
        layer: The `keras.Layer` (or `keras.Model`) whose variables the
            function reads.
        build: `build(options) -> fn`; `fn(*tensors)` returns nested tensors.
            `options` is the dict of static (Python) arguments; each distinct
            one is compiled once.

    Examples:
        >>> import keras
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn.decoding.compiled import CompiledFunction
        >>> dense = keras.layers.Dense(2)
        >>> _ = dense(np.zeros((1, 3), "float32"))
        >>> def build(options):
        ...     return lambda x: dense(x) * options["scale"]
        >>> run = CompiledFunction(dense, build)
        >>> tuple(run({"scale": 2.0}, np.ones((4, 3), "float32")).shape)
        (4, 2)
    """

    def __init__(self, layer, build):
        self.layer = layer
        self.build = build
        self._cache = {}

    def __call__(self, options, *tensors):
        key = _frozen(options)
        if key not in self._cache:
            self._cache[key] = self._compile(self.build(options))
        return self._cache[key](*tensors)

    def _compile(self, fn):
        backend = keras.backend.backend()
        if backend == "tensorflow":
            import tensorflow as tf

            return tf.function(fn)
        if backend == "jax":
            return _stateless_jit(self.layer, fn)
        if backend == "torch":
            return _torch_compiled(fn)
        return fn


# Set once torch.compile has failed to build in this process: a machine
# without a C++ compiler fails the same way for every search, each failure
# after a trace of the whole search, so the later ones run eagerly at once.
_TORCH_COMPILE_FAILURE = []


def _torch_compiled(fn):
    """`fn` under `torch.compile`, without gradients; eager, with one warning
    a process, where its compiler cannot build (no C++ compiler for the CPU
    kernels)."""
    import torch
    from torch._dynamo.exc import BackendCompilerFailed

    compiled = [fn if _TORCH_COMPILE_FAILURE else torch.compile(fn)]

    def run(*tensors):
        with torch.no_grad():
            try:
                return compiled[0](*tensors)
            except BackendCompilerFailed as error:
                if compiled[0] is fn:
                    raise
                compiled[0] = fn
                if not _TORCH_COMPILE_FAILURE:
                    _TORCH_COMPILE_FAILURE.append(str(error).splitlines()[0])
                    warnings.warn(
                        "torch.compile failed, so searches run eagerly: "
                        f"{_TORCH_COMPILE_FAILURE[0]}",
                        stacklevel=4,
                    )
                return fn(*tensors)

    return run


def _stateless_jit(layer, fn):
    """`fn` under `jax.jit`, with `layer`'s variables passed in as values."""
    import jax

    variables = list(layer.variables)
    assigned = []  # indices of the variables `fn` assigns, found when traced

    def stateless(values, *tensors):
        mapping = list(zip(variables, values, strict=True))
        with keras.StatelessScope(state_mapping=mapping) as scope:
            outputs = fn(*tensors)
        new = [scope.get_current_value(v) for v in variables]
        assigned[:] = [i for i, value in enumerate(new) if value is not None]
        return outputs, [new[i] for i in assigned]

    jitted = jax.jit(stateless)

    def run(*tensors):
        outputs, new = jitted([v.value for v in variables], *tensors)
        for i, value in zip(assigned, new, strict=True):
            variables[i].assign(value)
        return outputs

    return run
