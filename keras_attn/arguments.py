"""Constructor and function arguments: their checks, with TensorFlow Addons'
names, and the nested layers of a config.

A `tfa.seq2seq` user writes TFA's argument names (`attention_layer_size`,
`beam_width`, `memory=` in a constructor, ...); each is refused in one line
that names the keras_attn argument to use instead. A tensor given to a
layer's constructor is refused by its shape, never printed whole.
"""

import copy
import functools
import inspect

import keras

_LENGTHS_TO_MASK = "`keras.ops.arange(Tv)[None] < lengths[:, None]`"

# What each kind of callable takes instead of TFA's names.
TFA_NAMES = {
    "attention": {
        "memory": "the memory when called, `layer([query, memory])`, or "
        "in `layer.prepare_memory(memory)`",
        "memory_sequence_length": "a `value_mask=` of shape (batch, Tv) when "
        f"called (or in `prepare_memory`): {_LENGTHS_TO_MASK}",
        "probability_fn": "no `probability_fn`: its weights are a masked softmax",
        "scale": "`use_scale=True` (`GeneralAttention`, `DotAttention`)",
    },
    "cell": {
        "attention_mechanism": "`attention`, a keras_attn attention layer",
        "attention_layer_size": "`attention_units` (`style='luong'`)",
        "alignment_history": "`return_alignments=True`",
        "initial_cell_state": "`initial_state` in "
        "`get_initial_state_with_memory` or in the `AttentionRNN` call",
        "attention_layer": "`attention_units` and `attention_activation`",
        "memory": "the memory in `get_initial_state_with_memory(memory)` or "
        "`AttentionRNN(cell)([sequences, memory])`",
        "memory_sequence_length": "a `memory_mask` of shape (batch, Tv) where "
        f"the memory is given: {_LENGTHS_TO_MASK}",
    },
    "search": {
        "beam_width": "`beam_size`",
        "length_penalty_weight": "`length_penalty`",
        "maximum_iterations": "`max_length`",
        "start_tokens": "`start_ids`",
        "end_token": "`end_id`",
        "embedding_fn": "a `step(ids, state)` that embeds the ids itself",
        "output_layer": "a `step(ids, state)` that returns log-probabilities",
    },
    "tile_batch": {"multiplier": "`beam_size`", "t": "`nested`"},
}


def describe(value):
    """`value` for an error message: a tensor by its shape, never its contents."""
    if is_tensor(value):
        shape = tuple(None if d is None else int(d) for d in value.shape)
        return f"a tensor of shape {shape}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def is_tensor(value):
    """Whether `value` is an array or tensor of rank >= 1 (eager or symbolic)."""
    shape = getattr(value, "shape", None)
    return hasattr(value, "dtype") and shape is not None and len(shape) >= 1


def refuse_tfa_names(owner, kwargs, kind):
    """A one-line ValueError for a TFA argument name among `kwargs`.

    Args:
        owner: The callable's name, for the message.
        kwargs: The keyword arguments it was given.
        kind: A key of `TFA_NAMES`.
    """
    for name, value in kwargs.items():
        if name in TFA_NAMES[kind]:
            raise ValueError(
                f"`{name}` is TensorFlow Addons' argument; {owner} takes "
                f"{TFA_NAMES[kind][name]}. Received: {name}={describe(value)}"
            )


def check_constructor(cls, args, kwargs, kind):
    """Refuses TFA's names and tensors among a layer constructor's arguments.

    Args:
        cls: The layer class being constructed.
        args: Its positional arguments.
        kwargs: Its keyword arguments.
        kind: A key of `TFA_NAMES`.
    """
    owner = cls.__name__
    parameters = inspect.signature(cls.__init__).parameters
    refuse_tfa_names(
        owner, {k: v for k, v in kwargs.items() if k not in parameters}, kind
    )
    names = [
        p.name
        for p in parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ][1:]
    named = [
        (names[i] if i < len(names) else f"argument {i}", value)
        for i, value in enumerate(args)
    ]
    for name, value in [*named, *kwargs.items()]:
        if is_tensor(value):
            raise ValueError(
                f"`{name}` of {owner} must not be a tensor: a layer is made "
                "from settings and takes its tensors when called. Received: "
                f"{name}={describe(value)}"
            )


class CheckedConstructor:
    """A base for layers whose constructor refuses TFA's argument names and
    tensors (`check_constructor`), before any `__init__` runs.

    Listed before `keras.layers.Layer` among a layer's bases, so that the
    layer's own `__init__` stays its signature (`inspect.signature`, `help`).

    Attributes:
        tfa_names: The layer's key of `TFA_NAMES`.
    """

    tfa_names = "attention"

    def __new__(cls, *args, **kwargs):
        check_constructor(cls, args, kwargs, cls.tfa_names)
        return super().__new__(cls, *args, **kwargs)


def refuses_tfa_names(kind):
    """Decorates a function to refuse TFA's argument names (`TFA_NAMES[kind]`)
    with the name to use, before Python's "unexpected keyword" TypeError."""

    def decorate(fn):
        parameters = inspect.signature(fn).parameters

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            unknown = {k: v for k, v in kwargs.items() if k not in parameters}
            refuse_tfa_names(fn.__name__, unknown, kind)
            return fn(*args, **kwargs)

        return wrapper

    return decorate


def deserialize_layer(obj, custom_objects=None):
    """`obj` as a layer: a serialized config (dict) is deserialized, anything
    else (a layer, None) is returned as it is.

    Deserializing consumes the dict it reads, so it reads a deep copy: the
    caller's config stays intact (a config may be read twice, as
    `from_config` after `__init__`, or by a clone).
    """
    if isinstance(obj, dict):
        return keras.saving.deserialize_keras_object(
            copy.deepcopy(obj), custom_objects=custom_objects
        )
    return obj
