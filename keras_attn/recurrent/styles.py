"""What each style of `AttentionCellWrapper` does at a step.

An `AttentionCellWrapper` holds one style object, chosen in its `__init__`
by `style`. The object keeps no state: the style's arguments and weights are
the cell's, and the object holds the functions in which the styles differ.

* `BahdanauStyle`: attends with the previous state, before the cell.
* `LuongStyle`: attends with the new state, after the cell, and feeds the
  attentional state back into the next input (TFA's `AttentionWrapper`).
* `SelfStyle`: attends over the cell's own earlier states.
"""

import keras
from keras import ops

from keras_attn.arguments import describe, deserialize_layer
from keras_attn.layers.base import AttentionMemory
from keras_attn.layers.masking import as_dtype


def _concat(inputs, extra):
    return ops.concatenate([inputs, as_dtype(extra, inputs.dtype)], axis=-1)


class Style:
    """The functions of one style; this base holds what the styles share.

    Every function takes the `AttentionCellWrapper` it runs for.

    Attributes:
        name: The style's `style` argument.
        class_name: The cell class of the style.
        arguments: The style's own constructor arguments, with defaults.
        uses_memory: Whether the cell attends over a memory it is given.
    """

    name = None
    class_name = None
    arguments = {}
    uses_memory = True

    def configure(self, cell, **arguments):
        """Checks the style's arguments and sets them on `cell`."""

    def base_output_size(self, cell):
        """Width of the output, without the alignments."""
        return cell.units

    def cell_input_dim(self, cell):
        """Width of the wrapped cell's input."""
        return cell._input_dim

    def query_dim(self, cell):
        """Width of the attention's query."""
        return cell.units

    def extra_state_sizes(self, cell):
        """Sizes of the style's own states."""
        # Memory states have a size only known from the memory (None here);
        # `keras.layers.RNN` only reads it for shapes of `return_state`.
        return [None, None, None]

    def build_output_layer(self, cell):
        """Builds the sub-layer that combines context and state. Default: none."""

    def initial_step_states(self, cell, batch_size, dtype):
        """States the style carries between steps, before the memory's."""
        return []

    def step(
        self, cell, inputs, prev_output, cell_states, extra, memory, training, score
    ):
        """One step: `(output, weights, new_cell_states, new_extra)`.

        Args:
            cell: The `AttentionCellWrapper`.
            inputs: The step input `y_t`, `(batch, input_dim)`.
            prev_output: The previous output (without alignments).
            cell_states: The wrapped cell's flat states.
            extra: The style's own states (`extra_state_sizes`).
            memory: The `AttentionMemory` the states carry (None for
                `style="self"`, which attends over its own states).
            training: Whether dropout applies.
            score: The score's extra inputs, for `attention.step` (the
                coverage of a coverage attention, say).
        """
        raise NotImplementedError(f"{self.__class__.__name__} must implement `step`.")

    def config(self, cell):
        """The style's arguments, for `get_config`."""
        return {}


class BahdanauStyle(Style):
    """`c_t = attend(s_{t-1}, memory)`, `s_t = cell(s_{t-1}, [y_t; c_t])`."""

    name = "bahdanau"
    class_name = "BahdanauAttentionCell"

    def cell_input_dim(self, cell):
        return cell._input_dim + cell.memory_dim

    def query_dim(self, cell):
        return cell._cell_state_sizes[0]

    def step(
        self, cell, inputs, prev_output, cell_states, extra, memory, training, score
    ):
        context, weights = cell.attention.step(
            cell_states[0], memory, training=training, **score
        )
        joined = _concat(inputs, context)
        output, new_cell = cell._call_cell(joined, cell_states, training)
        return output, weights, new_cell, extra


class OutputKernel(keras.layers.Layer):
    """Holds `W_c`, a sub-layer of the cell, built once the memory is known.

    A sub-layer, made with the cell, may be built after the cell's `build`
    (by `get_initial_state_with_memory`, for a cell built from the step
    input alone), which a weight of the cell's own may not. The cell saves
    and loads the kernel as its own first variable, as it did when it held
    it, so files saved either way load.
    """

    def __init__(self, units, initializer, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.initializer = initializer

    def build(self, input_shape):
        self.kernel = self.add_weight(
            name="attention_kernel",
            shape=(int(input_shape[-1]), self.units),
            initializer=self.initializer,
        )

    def save_own_variables(self, store):
        """Nothing: the cell saves the kernel."""

    def load_own_variables(self, store):
        """Nothing: the cell loads the kernel."""


class AttentionalStateStyle(Style):
    """Attends with the new state and outputs `h~_t = act(W_c [c_t; s_t])`.

    Its arguments: `attention_units` (width of `h~_t`, the cell's `units` by
    default), `attention_activation` (Luong's `tanh`; None for the linear
    layer of TFA's `attention_layer_size`), `kernel_initializer` (`W_c`'s),
    or `attention_layer`, a Keras layer with `units` that makes `h~_t` from
    `[c_t; s_t]` itself (TFA's `attention_layer`).
    """

    arguments = {
        "attention_units": None,
        "attention_activation": "tanh",
        "kernel_initializer": "glorot_uniform",
        "attention_layer": None,
    }

    def configure(
        self,
        cell,
        attention_units=None,
        attention_activation="tanh",
        kernel_initializer="glorot_uniform",
        attention_layer=None,
    ):
        if attention_units is not None and (
            not isinstance(attention_units, int) or attention_units <= 0
        ):
            raise ValueError(
                "`attention_units` must be a positive integer or None. "
                f"Received: attention_units={attention_units!r}"
            )
        cell.attention_layer = deserialize_layer(attention_layer)
        if cell.attention_layer is not None:
            check_attention_layer(
                cell.attention_layer,
                attention_units,
                attention_activation,
                kernel_initializer,
            )
            attention_units = cell.attention_layer.units
        cell.attention_units = attention_units or cell.units
        cell.attention_activation = keras.activations.get(attention_activation)
        cell.kernel_initializer = keras.initializers.get(kernel_initializer)
        if cell.attention_layer is not None:
            return  # `W_c` is the layer's
        cell._output_kernel = OutputKernel(
            cell.attention_units,
            cell.kernel_initializer,
            dtype=cell.dtype_policy,
            name="attention_kernel",
        )

    def base_output_size(self, cell):
        return cell.attention_units

    def build_output_layer(self, cell):
        width = cell.memory_dim + cell.units
        if cell.attention_layer is not None:
            if not cell.attention_layer.built:
                cell.attention_layer.build((None, width))
        elif not cell._output_kernel.built:
            cell._output_kernel.build((None, width))

    def attentional_state(self, cell, context, state):
        """`h~_t = act(W_c [c_t; s_t])`, or `attention_layer([c_t; s_t])`."""
        joined = ops.concatenate([as_dtype(context, state.dtype), state], -1)
        if cell.attention_layer is not None:
            return as_dtype(cell.attention_layer(joined), state.dtype)
        kernel = as_dtype(cell._output_kernel.kernel, state.dtype)
        return cell.attention_activation(ops.matmul(joined, kernel))

    def config(self, cell):
        if cell.attention_layer is not None:
            return {
                "attention_layer": keras.saving.serialize_keras_object(
                    cell.attention_layer
                )
            }
        return {
            "attention_units": cell.attention_units,
            "attention_activation": keras.activations.serialize(
                cell.attention_activation
            ),
            "kernel_initializer": keras.initializers.serialize(cell.kernel_initializer),
        }


def check_attention_layer(layer, attention_units, activation, initializer):
    """A one-line ValueError for an `attention_layer` without int `units`, or
    given with the arguments of the `W_c` it replaces."""
    if not isinstance(layer, keras.layers.Layer) or not isinstance(
        getattr(layer, "units", None), int
    ):
        raise ValueError(
            "`attention_layer` must be a Keras layer with an int `units` (a "
            "Dense): it makes the attentional state from [context; state]. "
            f"Received: attention_layer={describe(layer)}"
        )
    given = {
        "attention_units": attention_units not in (None, layer.units),
        "attention_activation": activation != "tanh",
        "kernel_initializer": initializer != "glorot_uniform",
    }
    for name, differs in given.items():
        if differs:
            raise ValueError(
                f"`{name}` belongs to the kernel `W_c` that `attention_layer` "
                f"replaces: set it on the layer. Received: {name} with "
                f"attention_layer={describe(layer)}"
            )


class LuongStyle(AttentionalStateStyle):
    """`s_t = cell(s_{t-1}, [y_t; h~_{t-1}])`, `c_t = attend(s_t, memory)`.

    Its arguments, beyond `AttentionalStateStyle`'s: `use_attention_layer`
    (False: `h~_t = c_t`, no `W_c`), `output_attention` (False: the output
    is `s_t`, and `h~_t` is fed forward in a state of its own) and
    `input_feeding` (False: `s_t = cell(s_{t-1}, y_t)`, Luong et al.'s
    global attention without input feeding, OpenNMT's `input_feed 0`).
    """

    name = "luong"
    class_name = "LuongAttentionCell"
    arguments = {
        **AttentionalStateStyle.arguments,
        "use_attention_layer": True,
        "output_attention": True,
        "input_feeding": True,
    }

    def configure(
        self,
        cell,
        use_attention_layer=True,
        output_attention=True,
        input_feeding=True,
        **arguments,
    ):
        if not use_attention_layer and arguments.get("attention_units") is not None:
            raise ValueError(
                "`attention_units` sets the width of `W_c`, which "
                "`use_attention_layer=False` does not have. Received: "
                f"attention_units={arguments['attention_units']!r}"
            )
        if not use_attention_layer and arguments.get("attention_layer") is not None:
            raise ValueError(
                "`use_attention_layer=False` outputs the context itself; an "
                "`attention_layer` would replace `W_c`, which it does not "
                "have. Received: attention_layer="
                f"{describe(arguments['attention_layer'])}"
            )
        if not isinstance(input_feeding, bool):
            raise ValueError(
                f"`input_feeding` must be True or False. Received: "
                f"input_feeding={input_feeding!r}"
            )
        super().configure(cell, **arguments)
        cell.use_attention_layer = use_attention_layer
        cell.output_attention = output_attention
        cell.input_feeding = input_feeding

    def feeds_state(self, cell):
        """Whether `h~_t` travels to the next step in a state of its own."""
        return cell.input_feeding and not cell.output_attention

    def attention_size(self, cell):
        """Width of `h~_t`, fed to the next step."""
        if cell.use_attention_layer:
            return cell.attention_units
        return cell.memory_dim

    def base_output_size(self, cell):
        return self.attention_size(cell) if cell.output_attention else cell.units

    def cell_input_dim(self, cell):
        if not cell.input_feeding:
            return cell._input_dim
        return cell._input_dim + self.attention_size(cell)

    def extra_state_sizes(self, cell):
        feed = [self.attention_size(cell)] if self.feeds_state(cell) else []
        return [*feed, *super().extra_state_sizes(cell)]

    def build_output_layer(self, cell):
        if cell.use_attention_layer:
            super().build_output_layer(cell)

    def initial_step_states(self, cell, batch_size, dtype):
        if not self.feeds_state(cell):
            return []
        return [ops.zeros((batch_size, self.attention_size(cell)), dtype=dtype)]

    def attentional_state(self, cell, context, state):
        if cell.use_attention_layer:
            return super().attentional_state(cell, context, state)
        return as_dtype(context, state.dtype)

    def step(
        self, cell, inputs, prev_output, cell_states, extra, memory, training, score
    ):
        if cell.input_feeding:
            feed = prev_output if cell.output_attention else extra[0]
            inputs = _concat(inputs, feed)
        state, new_cell = cell._call_cell(inputs, cell_states, training)
        context, weights = cell.attention.step(
            state, memory, training=training, **score
        )
        attention = self.attentional_state(cell, context, state)
        if cell.output_attention:
            return attention, weights, new_cell, extra
        if not cell.input_feeding:
            return state, weights, new_cell, extra
        feed = as_dtype(attention, extra[0].dtype)
        return state, weights, new_cell, [feed, *extra[1:]]

    def config(self, cell):
        config = super().config(cell)
        if not cell.use_attention_layer:
            # `attention_units` follows the memory; it is no argument then.
            config["attention_units"] = None
        return {
            **config,
            "use_attention_layer": cell.use_attention_layer,
            "output_attention": cell.output_attention,
            "input_feeding": cell.input_feeding,
        }


class SelfStyle(AttentionalStateStyle):
    """`s_t = cell(s_{t-1}, y_t)` attends over its `max_length` last states.

    Its argument, beyond `AttentionalStateStyle`'s: `max_length`. Its states:
    the flattened value buffer, the flattened key buffer and the step count.
    """

    name = "self"
    class_name = "SelfAttentionCell"
    arguments = {**AttentionalStateStyle.arguments, "max_length": None}
    uses_memory = False

    def configure(self, cell, max_length=None, **arguments):
        super().configure(cell, **arguments)
        if not isinstance(max_length, int) or max_length <= 0:
            raise ValueError(
                'style="self" needs `max_length`, a positive integer '
                f"(how many earlier states to attend over). Received: "
                f"max_length={max_length!r}"
            )
        cell.max_length = max_length
        # The memory is the cell's own states, `max_length` of them.
        cell.memory_dim = cell.units
        cell._memory_length = max_length

    def extra_state_sizes(self, cell):
        key_dim = cell._key_dim
        key_size = None if key_dim is None else cell.max_length * key_dim
        return [cell.max_length * cell.units, key_size, 1]

    def initial_states(self, cell, batch_size, initial_state, training):
        """The initial states of `get_initial_state_self`."""
        cell._build_with_memory()
        dtype = cell.compute_dtype
        values = ops.zeros((batch_size, cell.max_length, cell.units), dtype=dtype)
        keys = cell.attention.prepare_memory(values).keys
        if training:
            cell._draw_dropout_masks(batch_size)
        return [
            ops.zeros((batch_size, cell.output_size), dtype=dtype),
            *cell._check_cell_states(initial_state, batch_size, dtype),
            ops.reshape(values, (batch_size, -1)),
            ops.reshape(keys, (batch_size, -1)),
            ops.zeros((batch_size, 1), dtype=dtype),
        ]

    def step(
        self, cell, inputs, prev_output, cell_states, extra, memory, training, score
    ):
        value_buf, key_buf, count = extra
        length, units, key_dim = cell.max_length, cell.units, cell._key_dim
        # Buffer slot j holds s_{t-L+j}; the last `count` slots are filled.
        positions = ops.arange(length, dtype="float32")[None, :]
        batch = ops.shape(value_buf)[0]
        memory = AttentionMemory(
            keys=ops.reshape(key_buf, (batch, length, key_dim)),
            values=ops.reshape(value_buf, (batch, length, units)),
            mask=ops.cast(count, "float32") > (length - 1) - positions,
        )
        state, new_cell = cell._call_cell(inputs, cell_states, training)
        context, weights = cell.attention.step(
            state, memory, training=training, **score
        )
        new_keys = cell.attention.prepare_memory(ops.expand_dims(state, 1)).keys
        new_extra = [
            _concat(value_buf[:, units:], state),
            _concat(key_buf[:, key_dim:], new_keys[:, 0]),
            ops.minimum(count + 1, length),
        ]
        output = self.attentional_state(cell, context, state)
        return output, weights, new_cell, new_extra

    def config(self, cell):
        return {**super().config(cell), "max_length": cell.max_length}


STYLE_OBJECTS = {s.name: s() for s in (BahdanauStyle, LuongStyle, SelfStyle)}


def take_style_arguments(style, kwargs):
    """Pops the arguments of `style` (a `Style`) out of `kwargs`.

    Raises:
        ValueError: For an argument of another style, naming its class.
    """
    for name, value in kwargs.items():
        if name in style.arguments:
            continue
        takers = [
            f'{other.class_name} (style="{other.name}")'
            for other in STYLE_OBJECTS.values()
            if name in other.arguments
        ]
        if takers:
            raise ValueError(
                f"`{name}` is an argument of {' and '.join(takers)}, not of "
                f'{style.class_name} (style="{style.name}"). Received: '
                f"{name}={describe(value)}"
            )
    return {name: kwargs.pop(name) for name in list(kwargs) if name in style.arguments}


def drop_other_styles_arguments(config, style):
    """`config` without the arguments only other styles than `style` take.

    Configs saved before the styles had classes of their own hold every
    style's arguments (`max_length: None` for a Luong cell, ...).
    """
    own = STYLE_OBJECTS[style].arguments if style in STYLE_OBJECTS else {}
    others = {n for s in STYLE_OBJECTS.values() for n in s.arguments} - set(own)
    return {name: value for name, value in config.items() if name not in others}
