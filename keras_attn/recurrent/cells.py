"""The attention cells of each style; `AttentionCellWrapper(style=...)` builds them.

* `BahdanauAttentionCell`: attends with the previous state, before the cell.
* `LuongAttentionCell`: attends with the new state, after the cell, and feeds
  the attentional state back into the next input (TFA's `AttentionWrapper`).
* `SelfAttentionCell`: attends over the cell's own earlier states.

Each overrides `AttentionCellWrapper._step` and the sizes it changes.
"""

import keras
from keras import ops

from keras_attn.layers.base import AttentionMemory
from keras_attn.layers.masking import as_dtype
from keras_attn.recurrent.wrapper import AttentionCellWrapper


def _concat(inputs, extra):
    return ops.concatenate([inputs, as_dtype(extra, inputs.dtype)], axis=-1)


@keras.saving.register_keras_serializable(package="keras_attn")
class BahdanauAttentionCell(AttentionCellWrapper):
    """Bahdanau et al. (2015): attend with the previous state, then step.

    `c_t = attend(s_{t-1}, memory)` and `s_t = cell(s_{t-1}, [y_t; c_t])`.
    Output: `s_t`, `(batch, units)`. `s_{t-1}` is the first state of the
    wrapped cell (`h` for an LSTM).

    Args:
        cell, attention, style, memory_dim, return_alignments: As in
            `AttentionCellWrapper`.
        **kwargs: Base `Layer` arguments.

    Examples:
        >>> import keras
        >>> import numpy as np
        >>> from keras_attn import AttentionRNN, BahdanauAttention
        >>> from keras_attn import BahdanauAttentionCell
        >>> rng = np.random.default_rng(0)
        >>> decoder_embeddings = rng.random((2, 4, 8), dtype="float32")
        >>> encoder_outputs = rng.random((2, 6, 16), dtype="float32")
        >>> cell = BahdanauAttentionCell(
        ...     keras.layers.GRUCell(32), BahdanauAttention(16))
        >>> outputs = AttentionRNN(cell)([decoder_embeddings, encoder_outputs])
        >>> tuple(outputs.shape)
        (2, 4, 32)
    """

    style = "bahdanau"

    @property
    def _cell_input_dim(self):
        return self._input_dim + self.memory_dim

    @property
    def _query_dim(self):
        return self._cell_state_sizes[0]

    def _step(self, inputs, prev_output, cell_states, extra, memory, training):
        context, weights = self.attention.step(
            cell_states[0], memory, training=training
        )
        joined = ops.concatenate([inputs, as_dtype(context, inputs.dtype)], -1)
        output, new_cell = self._call_cell(joined, cell_states, training)
        return output, weights, new_cell, extra


class _OutputKernel(keras.layers.Layer):
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


class _AttentionalStateCell(AttentionCellWrapper):
    """Attends with the new state and outputs `h~_t = act(W_c [c_t; s_t])`.

    Args:
        attention_units: Width of `h~_t`. Defaults to the cell's `units`.
        attention_activation: Activation of `h~_t` (Luong's `tanh`; None for
            the linear layer of TFA's `attention_layer_size`).
        kernel_initializer: Initializer of `W_c`.
    """

    def __init__(
        self,
        cell,
        attention,
        style=None,
        attention_units=None,
        attention_activation="tanh",
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(cell, attention, style, **kwargs)
        if attention_units is not None and (
            not isinstance(attention_units, int) or attention_units <= 0
        ):
            raise ValueError(
                "`attention_units` must be a positive integer or None. "
                f"Received: attention_units={attention_units!r}"
            )
        self.attention_units = attention_units or self.units
        self.attention_activation = keras.activations.get(attention_activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self._output_kernel = _OutputKernel(
            self.attention_units,
            self.kernel_initializer,
            dtype=self.dtype_policy,
            name="attention_kernel",
        )

    @property
    def _base_output_size(self):
        return self.attention_units

    def _build_output_layer(self):
        if not self._output_kernel.built:
            self._output_kernel.build((None, self.memory_dim + self.units))

    @property
    def attention_kernel(self):
        """`W_c`, `(memory_dim + units, attention_units)`."""
        return self._output_kernel.kernel

    def save_own_variables(self, store):
        super().save_own_variables(store)
        if self._output_kernel.built:
            store["0"] = self._output_kernel.kernel

    def load_own_variables(self, store):
        # `keys()`: the H5 store of Keras 3.5 has no `in`.
        if "0" in store.keys():
            if not self._output_kernel.built:
                self._output_kernel.build((None, store["0"].shape[0]))
            self._output_kernel.kernel.assign(store["0"])

    def _attentional_state(self, context, state):
        kernel = as_dtype(self.attention_kernel, state.dtype)
        joined = ops.concatenate([as_dtype(context, state.dtype), state], -1)
        return self.attention_activation(ops.matmul(joined, kernel))

    def get_config(self):
        return {
            **super().get_config(),
            "attention_units": self.attention_units,
            "attention_activation": keras.activations.serialize(
                self.attention_activation
            ),
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }


@keras.saving.register_keras_serializable(package="keras_attn")
class LuongAttentionCell(_AttentionalStateCell):
    """Luong et al. (2015): step, then attend with the new state.

    `s_t = cell(s_{t-1}, [y_t; h~_{t-1}])` (input feeding),
    `c_t = attend(s_t, memory)` and the attentional state
    `h~_t = tanh(W_c [c_t; s_t])`. Output: `h~_t`, `(batch, attention_units)`.
    This is TensorFlow Addons' `AttentionWrapper` (its names and theirs:
    docs/tfa-migration.md, "Migrating from tfa.seq2seq").

    Args:
        cell, attention, style, memory_dim, return_alignments: As in
            `AttentionCellWrapper`.
        attention_units: Width of `h~_t`. Defaults to the cell's `units`.
        attention_activation: Activation of `h~_t`; None gives TFA's linear
            `attention_layer_size` layer.
        use_attention_layer: If False, `h~_t = c_t` (no `W_c`; TFA's
            `attention_layer_size=None`) and `attention_units` is the
            memory's width.
        output_attention: If True, the output is `h~_t`; if False, `s_t`
            (`h~_t` is still fed to the next step, in a state of its own).
        kernel_initializer: Initializer of `W_c`.
        **kwargs: Base `Layer` arguments.

    Examples:
        >>> import keras
        >>> import numpy as np
        >>> from keras_attn import AttentionRNN, GeneralAttention, LuongAttentionCell
        >>> rng = np.random.default_rng(0)
        >>> decoder_embeddings = rng.random((2, 4, 8), dtype="float32")
        >>> encoder_outputs = rng.random((2, 6, 32), dtype="float32")
        >>> h = c = np.zeros((2, 32), "float32")  # the encoder's final states
        >>> cell = LuongAttentionCell(keras.layers.LSTMCell(32), GeneralAttention(),
        ...     attention_units=24, return_alignments=True)
        >>> outputs, alignments = AttentionRNN(cell)(
        ...     [decoder_embeddings, encoder_outputs], initial_state=[h, c])
        >>> tuple(outputs.shape), tuple(alignments.shape)
        ((2, 4, 24), (2, 4, 6))
    """

    style = "luong"

    def __init__(
        self,
        cell,
        attention,
        style=None,
        use_attention_layer=True,
        output_attention=True,
        **kwargs,
    ):
        super().__init__(cell, attention, style, **kwargs)
        if not use_attention_layer and kwargs.get("attention_units") is not None:
            raise ValueError(
                "`attention_units` sets the width of `W_c`, which "
                "`use_attention_layer=False` does not have. Received: "
                f"attention_units={kwargs['attention_units']!r}"
            )
        self.use_attention_layer = use_attention_layer
        self.output_attention = output_attention

    @property
    def _attention_size(self):
        """Width of `h~_t`, fed to the next step."""
        if self.use_attention_layer:
            return self.attention_units
        return self.memory_dim

    @property
    def _base_output_size(self):
        return self._attention_size if self.output_attention else self.units

    @property
    def _cell_input_dim(self):
        return self._input_dim + self._attention_size

    @property
    def _extra_state_sizes(self):
        feed = [] if self.output_attention else [self._attention_size]
        return [*feed, *super()._extra_state_sizes]

    def _build_output_layer(self):
        if self.use_attention_layer:
            super()._build_output_layer()

    def _initial_step_states(self, batch_size, dtype):
        if self.output_attention:
            return []
        return [ops.zeros((batch_size, self._attention_size), dtype=dtype)]

    def _attentional_state(self, context, state):
        if self.use_attention_layer:
            return super()._attentional_state(context, state)
        return as_dtype(context, state.dtype)

    def _step(self, inputs, prev_output, cell_states, extra, memory, training):
        feed = prev_output if self.output_attention else extra[0]
        state, new_cell = self._call_cell(_concat(inputs, feed), cell_states, training)
        context, weights = self.attention.step(state, memory, training=training)
        attention = self._attentional_state(context, state)
        if self.output_attention:
            return attention, weights, new_cell, extra
        feed = as_dtype(attention, extra[0].dtype)
        return state, weights, new_cell, [feed, *extra[1:]]

    def get_config(self):
        config = super().get_config()
        if not self.use_attention_layer:
            # `attention_units` follows the memory; it is no argument then.
            config["attention_units"] = None
        return {
            **config,
            "use_attention_layer": self.use_attention_layer,
            "output_attention": self.output_attention,
        }


@keras.saving.register_keras_serializable(package="keras_attn")
class SelfAttentionCell(_AttentionalStateCell):
    """Attends over the cell's own earlier states; no memory.

    `s_t = cell(s_{t-1}, y_t)` attends over `s_{t-max_length}..s_{t-1}` (a
    buffer of `max_length` states, oldest first), and the output is
    `h~_t = tanh(W_c [c_t; s_t])`, `(batch, attention_units)`. At the first
    step the buffer is empty and the context is zero. Masked input steps are
    not added to the buffer. For sequence models such as multivariate
    time-series forecasting. The alignments are `(batch, max_length)`.

    States: the last output, the wrapped cell's states, the flattened value
    buffer, the flattened key buffer and the step counter.

    Args:
        cell, attention, style, return_alignments: As in
            `AttentionCellWrapper`.
        max_length: How many earlier states are attended over.
        attention_units: Width of `h~_t`. Defaults to the cell's `units`.
        attention_activation: Activation of `h~_t`.
        kernel_initializer: Initializer of `W_c`.
        **kwargs: Base `Layer` arguments.

    Examples:
        >>> import keras
        >>> import numpy as np
        >>> from keras_attn import ScaledDotAttention, SelfAttentionCell
        >>> series = np.random.default_rng(0).random((2, 10, 3), dtype="float32")
        >>> cell = SelfAttentionCell(keras.layers.GRUCell(16), ScaledDotAttention(),
        ...     max_length=4)
        >>> outputs = keras.layers.RNN(cell, return_sequences=True)(series)
        >>> tuple(outputs.shape)
        (2, 10, 16)
    """

    style = "self"

    def __init__(self, cell, attention, style=None, max_length=None, **kwargs):
        super().__init__(cell, attention, style, **kwargs)
        if not isinstance(max_length, int) or max_length <= 0:
            raise ValueError(
                'style="self" needs `max_length`, a positive integer '
                f"(how many earlier states to attend over). Received: "
                f"max_length={max_length!r}"
            )
        self.max_length = max_length
        self._memory_length = max_length
        # The memory is the cell's own states.
        self.memory_dim = self.units

    @property
    def _extra_state_sizes(self):
        key_size = None if self._key_dim is None else self.max_length * self._key_dim
        return [self.max_length * self.units, key_size, 1]

    def get_initial_state(self, batch_size=None):
        states = self.get_initial_state_self(batch_size)
        # `keras.layers.RNN` calls it inside its own `call`, before its loop,
        # where it draws its own cell's masks too, training or not.
        self._draw_dropout_masks(batch_size)
        return states

    def get_initial_state_self(self, batch_size, initial_state=None, training=None):
        """Initial states.

        Args:
            batch_size: Batch size.
            initial_state: Optional initial state(s) of the wrapped cell.
            training: Whether the states start a training pass: then the
                wrapped cell's dropout masks, if it has dropout, are drawn
                here, before the loop (which JAX's `scan` needs).

        Returns:
            The list of initial states, to pass as `initial_state` to
            `keras.layers.RNN`.
        """
        self._build_with_memory()
        dtype = self.compute_dtype
        values = ops.zeros((batch_size, self.max_length, self.units), dtype=dtype)
        keys = self.attention.prepare_memory(values).keys
        if training:
            self._draw_dropout_masks(batch_size)
        return [
            ops.zeros((batch_size, self.output_size), dtype=dtype),
            *self._check_cell_states(initial_state, batch_size, dtype),
            ops.reshape(values, (batch_size, -1)),
            ops.reshape(keys, (batch_size, -1)),
            ops.zeros((batch_size, 1), dtype=dtype),
        ]

    def get_initial_state_with_memory(
        self, memory, memory_mask=None, initial_state=None, training=None
    ):
        raise ValueError(
            'style="self" has no memory (it attends over its own earlier '
            "states). Received a memory of shape "
            f"{tuple(memory.shape)}; use `get_initial_state_self`."
        )

    def memory_from_states(self, states):
        """None: what it attends over are its own earlier states, new at
        every step (`_step` reads them)."""
        return None

    def _step(self, inputs, prev_output, cell_states, extra, memory, training):
        value_buf, key_buf, count = extra
        length = self.max_length
        # Buffer slot j holds s_{t-L+j}; the last `count` slots are filled.
        positions = ops.arange(length, dtype="float32")[None, :]
        memory = AttentionMemory(
            keys=self._unflatten(key_buf, length, self._key_dim),
            values=self._unflatten(value_buf, length, self.units),
            mask=ops.cast(count, "float32") > (length - 1) - positions,
        )
        state, new_cell = self._call_cell(inputs, cell_states, training)
        context, weights = self.attention.step(state, memory, training=training)
        new_keys = self.attention.prepare_memory(ops.expand_dims(state, 1)).keys
        new_extra = [
            _concat(value_buf[:, self.units :], state),
            _concat(key_buf[:, self._key_dim :], new_keys[:, 0]),
            ops.minimum(count + 1, length),
        ]
        return self._attentional_state(context, state), weights, new_cell, new_extra

    def get_config(self):
        return {
            **super().get_config(),
            "max_length": self.max_length,
            "memory_dim": None,
        }
