"""The search's checks of what it is given and of what the step returns.

Each raises a one-line ValueError naming the argument, what it must be and
what it was. Shapes are compared only where both are known, so symbolic and
traced batches (None) pass; the check of the values (`check_normalized`)
runs only where the values exist, eagerly.
"""

import keras
from keras import ops
from keras.backend import standardize_dtype

# How far a row's logsumexp may be from 0: the rounding of a log_softmax in
# float32, or in 16 bits (each log-probability is off by up to 2**-8 of it).
_TOLERANCE = {"float16": 0.1, "bfloat16": 0.1}
_DEFAULT_TOLERANCE = 1e-3


def _shape(x):
    return tuple(None if d is None else int(d) for d in x.shape)


def check_beam_sizes(beam_size, num_hypotheses):
    """A ValueError unless `1 <= num_hypotheses <= beam_size`, Python ints."""
    if isinstance(beam_size, bool) or not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(
            f"`beam_size` must be a Python int >= 1. Received: beam_size={beam_size!r}"
        )
    if (
        isinstance(num_hypotheses, bool)
        or not isinstance(num_hypotheses, int)
        or not 1 <= num_hypotheses <= beam_size
    ):
        raise ValueError(
            "`num_hypotheses` must be a Python int in [1, beam_size="
            f"{beam_size}]. Received: num_hypotheses={num_hypotheses!r}"
        )


def check_start_ids(start_ids, initial_state):
    """`start_ids` as an int32 `(B,)` tensor, or a ValueError.

    Args:
        start_ids: What the search was given.
        initial_state: Nested tensors `(B, ...)`, or None; their batch must
            be that of `start_ids` where both are known.

    Returns:
        `start_ids` converted to int32.
    """
    start_ids = ops.convert_to_tensor(start_ids, "int32")
    shape = _shape(start_ids)
    if len(shape) != 1:
        received = (
            f"start_ids={ops.convert_to_numpy(start_ids).item()}"
            if not shape
            else f"start_ids with shape {shape}"
        )
        raise ValueError(
            "`start_ids` must be an int vector of shape (batch,), one start "
            "token per example; for one token everywhere pass "
            f"`keras.ops.full((batch,), start_id, 'int32')`. Received: {received}"
        )
    leaves = [] if initial_state is None else keras.tree.flatten(initial_state)
    for leaf in leaves:
        rows = _shape(leaf)[0] if len(leaf.shape) else None
        if None not in (rows, shape[0]) and rows != shape[0]:
            raise ValueError(
                "`start_ids` must have one id per example of `initial_state`, "
                f"whose tensors have {rows} rows. Received: start_ids with "
                f"shape {shape}"
            )
    return start_ids


def check_step_rows(log_probs, state, rows, beam_size):
    """A ValueError if the step returned other than `rows` rows.

    Args:
        log_probs: The step's log-probabilities, `(N, V)` expected.
        state: The step's new state (nested tensors `(N, ...)`, or `()`).
        rows: The static number of rows `N` the step was given, or None.
        beam_size: The search's beam size.
    """
    if rows is None:
        return
    beams = (
        f" (batch * beam_size, beam_size={beam_size}; a tensor the step "
        "captures, such as the encoder memory, must be tiled with "
        "`keras_attn.tile_batch(memory, beam_size)`)"
        if beam_size > 1
        else ""
    )
    outputs = [("log_probs", log_probs)]
    outputs += [("state", leaf) for leaf in keras.tree.flatten(state)]
    for name, x in outputs:
        shape = _shape(x)
        if not shape or None not in (shape[0], rows) and shape[0] != rows:
            raise ValueError(
                f"`step` must return {name} with the {rows} rows of the ids it "
                f"was given{beams}. Received: {name} with shape {shape}"
            )
    if len(_shape(log_probs)) != 2:
        raise ValueError(
            "`step` must return log_probs of shape (rows, vocabulary). "
            f"Received: log_probs with shape {_shape(log_probs)}"
        )


def _torch_compiling():
    """Whether `torch.compile` is tracing the call: as in `jax.jit` or a
    `tf.function`, its values are not read (reading one leaves the graph)."""
    if keras.backend.backend() != "torch":
        return False
    import torch

    return torch.compiler.is_compiling()


def _concrete(x):
    """`x` as a NumPy value if it has one now, else None (while tracing)."""
    if _torch_compiling():
        return None
    try:
        return ops.convert_to_numpy(x)
    except (TypeError, ValueError, NotImplementedError):
        # A JAX tracer, or a symbolic TensorFlow tensor (`jax.jit`,
        # `tf.function`): no values yet.
        return None


def check_normalized(log_probs, dtype):
    """A ValueError unless every row of `log_probs` is a log-distribution.

    Checks that each row's logsumexp is 0 (rows that are all `-inf`, with no
    possible token, pass). Only where the values exist: eagerly on every
    backend; inside `jax.jit`, a `tf.function` or `torch.compile` there are
    none to read while the search is traced, and the check does not run.

    Args:
        log_probs: float32 `(N, V)`, the first step's.
        dtype: The dtype the step returned them in (sets the tolerance).
    """
    if _torch_compiling():
        return
    # A row with no possible token is told by its maximum (Keras' torch
    # logsumexp before 3.7 gives nan for it, not `-inf`); `initial`, for an
    # empty batch.
    impossible = ops.max(log_probs, axis=-1, initial=float("-inf")) == float("-inf")
    total = ops.where(impossible, 0.0, ops.logsumexp(log_probs, axis=-1))
    worst = _concrete(ops.max(ops.abs(total), initial=0.0))
    tolerance = _TOLERANCE.get(standardize_dtype(dtype), _DEFAULT_TOLERANCE)
    if worst is not None and not float(worst) <= tolerance:
        raise ValueError(
            "`step` must return log-probabilities, each row's logsumexp 0 "
            "(`keras.ops.log_softmax(logits)`; pass `from_logits=True` for "
            "logits, `check_log_probs=False` for scores that are not). "
            "Received: log_probs whose rows' "
            f"logsumexp is off by up to {float(worst):.4g} at the first step"
        )


def check_stop_ids(stop_ids):
    """`stop_ids` as a tuple of Python ints >= 0, or a ValueError.

    Args:
        stop_ids: An int, or a list or tuple of ints: tokens that end a row
            as the end token does.
    """
    ids = (stop_ids,) if isinstance(stop_ids, int) else stop_ids
    if not isinstance(ids, (list, tuple)) or any(
        isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in ids
    ):
        raise ValueError(
            "`stop_ids` must be a Python int >= 0 or a list of them. Received: "
            f"stop_ids={stop_ids!r}"
        )
    return tuple(ids)


def check_ids_in_vocabulary(end_id, stop_ids, vocab):
    """A ValueError unless `end_id` and every stop id are in `[0, vocab)`.

    Where the vocabulary is static (the step's `log_probs.shape[1]`) and
    `end_id` has a value; while tracing a dynamic vocabulary (a copy
    mechanism's extended one) there is nothing to compare, and the search's
    result is then that of an end id it never meets: every row runs to
    `max_length`.

    Args:
        end_id: The end token, an int scalar.
        stop_ids: A tuple of Python ints.
        vocab: The vocabulary's size, a Python int, or None if unknown.
    """
    if vocab is None:
        return
    named = [("stop_ids", i) for i in stop_ids]
    if isinstance(end_id, int):
        # Read as it is: through a tensor or NumPy, `torch.compile` would
        # leave its graph to read it back.
        named.insert(0, ("end_id", end_id))
    else:
        end = _concrete(end_id)
        if end is not None and end.ndim == 0:
            named.insert(0, ("end_id", int(end)))
    for name, value in named:
        if not 0 <= value < vocab:
            raise ValueError(
                f"`{name}` must be a token of the step's vocabulary, in [0, "
                f"{vocab}): outside it, no row would ever end. Received: "
                f"{name}={value}"
            )
