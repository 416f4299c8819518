"""Attention inside a recurrent cell: Bahdanau, Luong and self-attentive RNNs.

`AttentionCellWrapper` wraps any Keras RNN cell (`LSTMCell`, `GRUCell`,
`SimpleRNNCell`, ...) and any `BaseAttention` layer, and attends at every step.

Keras 3's `RNN` layer has no `constants` argument, so the encoder memory
travels in the cell's *states*: `get_initial_state_with_memory` projects the
memory once (`attention.prepare_memory`) and returns the full initial state
list; every step reads the projected keys back from the states and calls
`attention.step`, so the memory is never re-projected per step. Every state
is rank 2 `(batch, n)` (the memory is flattened), because the JAX and PyTorch
loops broadcast an input mask `(batch, 1)` against each state, and the first
state is always the cell's last output, which the JAX loop repeats at masked
steps.

`AttentionRNN` is the layer to use in functional models: it takes
`[sequences, memory]`, builds that initial state inside its own `call` (so the
projection is part of the model graph and serializes) and can return the
alignment history separately.
"""

import keras
from keras import ops, tree

from keras_attn.base import AttentionMemory, BaseAttention

STYLES = ("bahdanau", "luong", "self")


def _deserialize(obj, custom_objects=None):
    if isinstance(obj, dict):
        return keras.saving.deserialize_keras_object(obj, custom_objects=custom_objects)
    return obj


def _is_shape(x):
    return all(d is None or isinstance(d, int) for d in x)


def _flat_size(size):
    return [int(s) if s is not None else None for s in tree.flatten(size)]


@keras.saving.register_keras_serializable(package="keras_attn")
class AttentionCellWrapper(keras.layers.Layer):
    """Wraps an RNN cell so that it attends at every step.

    Three styles, with `s_t` the wrapped cell's output (its hidden state),
    `y_t` the step input and `c_t` the attention context:

    * `"bahdanau"` (Bahdanau et al. 2015): the score uses the previous state,
      `c_t = attend(s_{t-1}, memory)`, and the context joins the input,
      `s_t = cell(s_{t-1}, [y_t; c_t])`. Output: `s_t`, `(batch, units)`.
      `s_{t-1}` is the first state of the wrapped cell (`h` for an LSTM).
    * `"luong"` (Luong et al. 2015): `s_t = cell(s_{t-1}, [y_t; h~_{t-1}])`
      (input feeding), `c_t = attend(s_t, memory)` and the attentional state
      `h~_t = tanh(W_c [c_t; s_t])`. Output: `h~_t`,
      `(batch, attention_units)`.
    * `"self"`: no memory; `s_t = cell(s_{t-1}, y_t)` attends over the cell's
      own earlier states `s_{t-max_length}..s_{t-1}` (a buffer of
      `max_length` states, oldest first), `h~_t = tanh(W_c [c_t; s_t])`.
      At the first step the buffer is empty and the context is zero. Masked
      input steps are not added to the buffer. For sequence models such as
      multivariate time-series forecasting.

    With `return_alignments=True`, each step's output is `[out_t; alpha_t]`,
    the attention weights `alpha_t` `(batch, Tv)` (`(batch, max_length)` for
    `"self"`) concatenated after the output; `split_output` separates them.
    `AttentionRNN` does it for you.

    States (a flat list, all `(batch, n)`): the last output, the wrapped
    cell's states, then the flattened projected keys, the flattened memory
    values and the memory mask (as 0/1 floats), or for `"self"` the value
    buffer, the key buffer and the step counter.

    Args:
        cell: A Keras RNN cell (a layer with `state_size` and
            `call(inputs, states)`), or its serialized config.
        attention: A `BaseAttention` layer (or its config). Its query is
            `s_{t-1}` or `s_t` (`units` wide); its keys and values are the
            memory (for `"self"`, the cell's states).
        style: `"bahdanau"`, `"luong"` or `"self"`.
        attention_units: Width of `h~_t` (`"luong"` and `"self"`). Defaults to
            the cell's `units`.
        max_length: `"self"` only: how many earlier states are attended over.
        memory_dim: Last dimension of the memory. Inferred by
            `get_initial_state_with_memory` (or `AttentionRNN.build`) if not
            given; it is saved in the config.
        return_alignments: Append the attention weights to each output.
        kernel_initializer: Initializer of `W_c`.
        **kwargs: Base `Layer` arguments.

    Example:
    >>> cell = AttentionCellWrapper(
    ...     keras.layers.LSTMCell(64), DotAttention(), style="luong")
    >>> states = cell.get_initial_state_with_memory(
    ...     encoder_outputs, memory_mask, initial_state=[h, c])
    >>> outputs = keras.layers.RNN(cell, return_sequences=True)(
    ...     decoder_inputs, initial_state=states)
    """

    def __init__(
        self,
        cell,
        attention,
        style="luong",
        attention_units=None,
        max_length=None,
        memory_dim=None,
        return_alignments=False,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        cell = _deserialize(cell)
        attention = _deserialize(attention)
        if not (hasattr(cell, "state_size") and hasattr(cell, "call")):
            raise ValueError(
                "`cell` must be a Keras RNN cell with `state_size` and "
                f"`call(inputs, states)`. Received: cell={cell!r}"
            )
        if not isinstance(attention, BaseAttention):
            raise ValueError(
                "`attention` must be a keras_attn `BaseAttention` layer "
                f"(DotAttention, BahdanauAttention, ...). Received: "
                f"attention={attention!r}"
            )
        if style not in STYLES:
            raise ValueError(
                f"`style` must be one of {STYLES}. Received: style={style!r}"
            )
        if style == "self":
            if not isinstance(max_length, int) or max_length <= 0:
                raise ValueError(
                    'style="self" needs `max_length`, a positive integer '
                    f"(how many earlier states to attend over). Received: "
                    f"max_length={max_length!r}"
                )
        elif max_length is not None:
            raise ValueError(
                f'`max_length` is only for style="self". Received: '
                f"style={style!r}, max_length={max_length!r}"
            )
        if attention_units is not None and (
            not isinstance(attention_units, int) or attention_units <= 0
        ):
            raise ValueError(
                "`attention_units` must be a positive integer or None. "
                f"Received: attention_units={attention_units!r}"
            )
        self.cell = cell
        self.attention = attention
        self.style = style
        self.max_length = max_length
        self.memory_dim = memory_dim
        self.return_alignments = return_alignments
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

        self._cell_state_sizes = _flat_size(cell.state_size)
        self._cell_nested_state = isinstance(cell.state_size, (list, tuple))
        self.units = getattr(cell, "output_size", None)
        if not isinstance(self.units, int):
            self.units = self._cell_state_sizes[0]
        self.attention_units = attention_units or self.units
        self._memory_length = max_length
        self._key_dim = None
        self._input_dim = None
        self.supports_masking = True

    # ----------------------------------------------------------- sizes

    @property
    def _base_output_size(self):
        return self.units if self.style == "bahdanau" else self.attention_units

    @property
    def output_size(self):
        if not self.return_alignments:
            return self._base_output_size
        if self._memory_length is None:
            return None
        return self._base_output_size + self._memory_length

    @property
    def state_size(self):
        # Memory states have a size only known from the memory (None here);
        # `keras.layers.RNN` only reads it for shapes of `return_state`.
        if self.style == "self":
            key_size = (
                None if self._key_dim is None else (self.max_length * self._key_dim)
            )
            extra = [self.max_length * self.units, key_size, 1]
        else:
            extra = [None, None, None]
        return [self.output_size, *self._cell_state_sizes, *extra]

    # ----------------------------------------------------------- build

    def build(self, input_shape):
        self._input_dim = int(input_shape[-1])
        if self.style == "self":
            self.memory_dim = self.units
        if self.memory_dim is not None:
            self._build_with_memory()
        self.built = True

    def _build_with_memory(self):
        """Builds cell, attention and `W_c` once the memory's width is known."""
        if self._key_dim is not None:
            return
        if self._input_dim is None:
            raise ValueError(
                f"{self.__class__.__name__} is not built: it is built by "
                "`keras.layers.RNN` (or `AttentionRNN`) from the step input "
                "shape."
            )
        extra_input = {"bahdanau": self.memory_dim, "luong": self.attention_units}
        cell_input_dim = self._input_dim + extra_input.get(self.style, 0)
        if not self.cell.built:
            self.cell.build((None, cell_input_dim))
        query_dim = (
            self._cell_state_sizes[0] if self.style == "bahdanau" else self.units
        )
        if not self.attention.built:
            self.attention.build([(None, query_dim), (None, None, self.memory_dim)])
        if self.style != "bahdanau":
            # Without `memory_dim`, `build` (from the step input alone) left
            # W_c to `get_initial_state_with_memory`: the layer is already
            # marked built by then, so its tracker is unlocked for W_c, as
            # Keras does itself when it quantizes a built layer.
            locked = self._tracker.locked
            self._tracker.unlock()
            try:
                self.attention_kernel = self.add_weight(
                    name="attention_kernel",
                    shape=(self.memory_dim + self.units, self.attention_units),
                    initializer=self.kernel_initializer,
                )
            finally:
                if locked:
                    self._tracker.lock()
        # The projected keys' width (e.g. `units` of a Bahdanau score), to
        # unflatten the key state in `call`.
        probe = ops.zeros((1, 1, self.memory_dim), dtype=self.compute_dtype)
        self._key_dim = int(self.attention.prepare_memory(probe).keys.shape[-1])

    def _set_memory_dim(self, memory_dim):
        if memory_dim is None:
            raise ValueError(
                "The memory's last dimension must be known. Received memory "
                f"dim: {memory_dim}"
            )
        memory_dim = int(memory_dim)
        if self.memory_dim is None:
            self.memory_dim = memory_dim
        elif memory_dim != self.memory_dim:
            raise ValueError(
                f"{self.__class__.__name__} was built for a memory of last "
                f"dimension {self.memory_dim}. Received memory of last "
                f"dimension {memory_dim}."
            )

    # ----------------------------------------------------------- states

    def _initial_cell_states(self, batch_size, dtype):
        init = getattr(self.cell, "get_initial_state", None)
        if init is not None:
            states = tree.flatten(init(batch_size=batch_size))
        else:
            states = [ops.zeros((batch_size, s)) for s in self._cell_state_sizes]
        return [ops.cast(s, dtype) for s in states]

    def _check_cell_states(self, initial_state, batch_size, dtype):
        if initial_state is None:
            return self._initial_cell_states(batch_size, dtype)
        states = tree.flatten(initial_state)
        if len(states) != len(self._cell_state_sizes):
            raise ValueError(
                f"The wrapped {self.cell.__class__.__name__} has "
                f"{len(self._cell_state_sizes)} state(s) of sizes "
                f"{self._cell_state_sizes}. Received {len(states)} initial "
                f"state(s) of shapes {[tuple(s.shape) for s in states]}."
            )
        return [ops.cast(s, dtype) for s in states]

    def get_initial_state(self, batch_size=None):
        """Zero initial states; `"self"` style only (others need a memory)."""
        if self.style != "self":
            raise ValueError(
                f'style="{self.style}" attends over a memory: pass '
                "`initial_state=cell.get_initial_state_with_memory(memory, "
                "memory_mask, initial_state)` to `keras.layers.RNN`, or use "
                "`AttentionRNN` with inputs `[sequences, memory]`."
            )
        return self.get_initial_state_self(batch_size)

    def get_initial_state_self(self, batch_size, initial_state=None):
        """Initial states of the `"self"` style.

        Args:
            batch_size: Batch size.
            initial_state: Optional initial state(s) of the wrapped cell.

        Returns:
            The list of initial states, to pass as `initial_state` to
            `keras.layers.RNN`.
        """
        self._build_with_memory()
        dtype = self.compute_dtype
        length = self.max_length
        values = ops.zeros((batch_size, length, self.units), dtype=dtype)
        keys = self.attention.prepare_memory(values).keys
        return [
            ops.zeros((batch_size, self.output_size), dtype=dtype),
            *self._check_cell_states(initial_state, batch_size, dtype),
            ops.reshape(values, (batch_size, -1)),
            ops.reshape(keys, (batch_size, -1)),
            ops.zeros((batch_size, 1), dtype=dtype),
        ]

    def get_initial_state_with_memory(
        self, memory, memory_mask=None, initial_state=None
    ):
        """Projects the memory once and returns the initial states.

        Call it where the memory is a real tensor: eagerly, or inside a
        layer's `call` (`AttentionRNN` does that for functional models).

        Args:
            memory: Encoder outputs, `(batch, Tv, memory_dim)`.
            memory_mask: Optional boolean `(batch, Tv)`; False marks padding
                (zero attention weight).
            initial_state: Optional initial state(s) of the wrapped cell, e.g.
                the encoder's final `[h, c]`; zeros if None.

        Returns:
            The list of initial states, to pass as `initial_state` to
            `keras.layers.RNN(cell)`.
        """
        if self.style == "self":
            raise ValueError(
                'style="self" has no memory (it attends over its own earlier '
                "states). Received a memory of shape "
                f"{tuple(memory.shape)}; use `get_initial_state_self`."
            )
        if len(memory.shape) != 3:
            raise ValueError(
                "`memory` must have rank 3 (batch, Tv, memory_dim). Received "
                f"memory shape: {tuple(memory.shape)}"
            )
        self._set_memory_dim(memory.shape[-1])
        if self._input_dim is not None:
            self._build_with_memory()
        elif not self.attention.built:
            raise ValueError(
                f"{self.__class__.__name__} is not built: build it with the "
                "step input shape first, e.g. `cell.build((None, input_dim))`, "
                "or use `AttentionRNN`."
            )
        dtype = self.compute_dtype
        memory = ops.cast(memory, dtype)
        batch_size = ops.shape(memory)[0]
        self._memory_length = memory.shape[1]
        prepared = self.attention.prepare_memory(memory, value_mask=memory_mask)
        alignments = ops.zeros_like(prepared.mask, dtype=dtype)
        output = ops.zeros((batch_size, self._base_output_size), dtype=dtype)
        if self.return_alignments:
            output = ops.concatenate([output, alignments], axis=-1)
        return [
            output,
            *self._check_cell_states(initial_state, batch_size, dtype),
            ops.reshape(ops.cast(prepared.keys, dtype), (batch_size, -1)),
            ops.reshape(memory, (batch_size, -1)),
            ops.cast(prepared.mask, dtype),
        ]

    # ----------------------------------------------------------- step

    def split_output(self, outputs):
        """Splits `[out; alpha]` outputs of `return_alignments=True`.

        Args:
            outputs: `(..., output_size)` outputs of the RNN.

        Returns:
            `(outputs, alignments)`: `(..., out_dim)` and float32 `(..., Tv)`.
        """
        size = self._base_output_size
        return outputs[..., :size], ops.cast(outputs[..., size:], "float32")

    def _call_cell(self, inputs, states, training):
        states = list(states) if self._cell_nested_state else states[0]
        kwargs = {}
        if getattr(self.cell, "_call_has_training_arg", False):
            kwargs["training"] = training
        output, new_states = self.cell(inputs, states, **kwargs)
        return output, tree.flatten(new_states)

    def _unflatten(self, flat, length, dim):
        return ops.reshape(flat, (ops.shape(flat)[0], length, dim))

    def _attentional_state(self, context, state):
        kernel = ops.cast(self.attention_kernel, state.dtype)
        joined = ops.concatenate([ops.cast(context, state.dtype), state], -1)
        return ops.tanh(ops.matmul(joined, kernel))

    def call(self, inputs, states, training=None):
        if self._key_dim is None:
            raise ValueError(
                f"{self.__class__.__name__} does not know its memory yet: pass "
                "`initial_state=cell.get_initial_state_with_memory(memory)` to "
                "`keras.layers.RNN`, or use `AttentionRNN`."
            )
        states = list(states)
        num_cell = len(self._cell_state_sizes)
        prev_output = states[0]
        cell_states = states[1 : 1 + num_cell]
        extra = states[1 + num_cell :]

        if self.style == "self":
            value_buf, key_buf, count = extra
            length = self.max_length
            # Buffer slot j holds s_{t-L+j}; the last `count` slots are filled.
            positions = ops.arange(length, dtype="float32")[None, :]
            filled = ops.cast(count, "float32") > (length - 1) - positions
            memory = AttentionMemory(
                keys=self._unflatten(key_buf, length, self._key_dim),
                values=self._unflatten(value_buf, length, self.units),
                mask=filled,
            )
            state, new_cell = self._call_cell(inputs, cell_states, training)
            context, weights = self.attention.step(state, memory, training=training)
            output = self._attentional_state(context, state)
            new_keys = self.attention.prepare_memory(ops.expand_dims(state, 1))
            new_keys = ops.cast(new_keys.keys[:, 0], key_buf.dtype)
            new_extra = [
                ops.concatenate(
                    [value_buf[:, self.units :], ops.cast(state, value_buf.dtype)],
                    axis=-1,
                ),
                ops.concatenate([key_buf[:, self._key_dim :], new_keys], -1),
                ops.minimum(count + 1, length),
            ]
        else:
            keys, values, mask = extra
            length = ops.shape(mask)[1]
            memory = AttentionMemory(
                keys=self._unflatten(keys, length, self._key_dim),
                values=self._unflatten(values, length, self.memory_dim),
                mask=ops.cast(mask, "bool"),
            )
            if self.style == "bahdanau":
                context, weights = self.attention.step(
                    cell_states[0], memory, training=training
                )
                cell_input = ops.concatenate(
                    [inputs, ops.cast(context, inputs.dtype)], axis=-1
                )
                output, new_cell = self._call_cell(cell_input, cell_states, training)
            else:
                feed = prev_output[:, : self.attention_units]
                cell_input = ops.concatenate(
                    [inputs, ops.cast(feed, inputs.dtype)], axis=-1
                )
                state, new_cell = self._call_cell(cell_input, cell_states, training)
                context, weights = self.attention.step(state, memory, training=training)
                output = self._attentional_state(context, state)
            new_extra = extra

        output = ops.cast(output, prev_output.dtype)
        if self.return_alignments:
            output = ops.concatenate([output, ops.cast(weights, output.dtype)], axis=-1)
        new_cell = [
            ops.cast(s, c.dtype) for s, c in zip(new_cell, cell_states, strict=True)
        ]
        return output, [output, *new_cell, *new_extra]

    # ----------------------------------------------------------- config

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "cell": keras.saving.serialize_keras_object(self.cell),
                "attention": keras.saving.serialize_keras_object(self.attention),
                "style": self.style,
                "attention_units": self.attention_units,
                "max_length": self.max_length,
                "memory_dim": None if self.style == "self" else self.memory_dim,
                "return_alignments": self.return_alignments,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
            }
        )
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        config["cell"] = _deserialize(config["cell"], custom_objects)
        config["attention"] = _deserialize(config["attention"], custom_objects)
        return cls(**config)


@keras.saving.register_keras_serializable(package="keras_attn")
class AttentionRNN(keras.layers.Layer):
    """Runs an `AttentionCellWrapper` over a sequence, attending over a memory.

    The functional-model way to use the cell: the memory is projected once,
    inside this layer's `call`, and the alignment history comes back as its
    own output when the cell has `return_alignments=True`.

    Args:
        cell: An `AttentionCellWrapper` (or its config).
        return_sequences: Return every step's output (default) or the last.
        return_state: Also return the wrapped cell's final states.
        go_backwards: Process the sequence backwards.
        unroll: Unroll the loop (short, static-length sequences only).
        zero_output_for_mask: Zero outputs (and alignments) at masked steps
            instead of repeating the previous ones.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: `[sequences, memory]`: `(batch, T, input_dim)` and
            `(batch, Tv, memory_dim)`; just `sequences` for `style="self"`.
        initial_state: Optional initial state(s) of the wrapped cell (the
            encoder's final states, say).
        mask: Propagated by Keras, `[sequence_mask, memory_mask]`: masked
            steps keep the state; masked memory positions get zero weight.
        memory_mask: Optional boolean `(batch, Tv)`; overrides the propagated
            memory mask.
        training: Passed to the cell and the attention (dropout).

    Returns:
        `outputs`: `(batch, T, out_dim)` (or `(batch, out_dim)`); then, if
        `cell.return_alignments`, the float32 alignments `(batch, T, Tv)`
        (`(batch, T, max_length)` for `"self"`, oldest state first); then, if
        `return_state`, the wrapped cell's final states.

    Example:
    >>> cell = AttentionCellWrapper(keras.layers.GRUCell(64),
    ...     BahdanauAttention(32), style="bahdanau", return_alignments=True)
    >>> outputs, alignments = AttentionRNN(cell)(
    ...     [decoder_embeddings, encoder_outputs], initial_state=encoder_h)
    """

    def __init__(
        self,
        cell,
        return_sequences=True,
        return_state=False,
        go_backwards=False,
        unroll=False,
        zero_output_for_mask=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        cell = _deserialize(cell)
        if not isinstance(cell, AttentionCellWrapper):
            raise ValueError(
                f"`cell` must be an AttentionCellWrapper. Received: cell={cell!r}"
            )
        self.return_sequences = return_sequences
        self.return_state = return_state
        self.go_backwards = go_backwards
        self.unroll = unroll
        self.zero_output_for_mask = zero_output_for_mask
        self.rnn = keras.layers.RNN(
            cell,
            return_sequences=return_sequences,
            return_state=True,
            go_backwards=go_backwards,
            unroll=unroll,
            zero_output_for_mask=zero_output_for_mask,
            dtype=self.dtype_policy,
        )
        self.supports_masking = True

    @property
    def cell(self):
        return self.rnn.cell

    def _split_inputs(self, inputs):
        if isinstance(inputs, (list, tuple)) and not _is_shape(inputs):
            if len(inputs) != 2:
                raise ValueError(
                    f"{self.__class__.__name__} takes `[sequences, memory]`. "
                    f"Received {len(inputs)} inputs."
                )
            sequences, memory = inputs
        else:
            sequences, memory = inputs, None
        if (memory is None) != (self.cell.style == "self"):
            raise ValueError(
                f'style="{self.cell.style}" takes '
                + (
                    "`sequences` alone (no memory)"
                    if self.cell.style == "self"
                    else "`[sequences, memory]`"
                )
                + f". Received memory={memory!r:.80}"
            )
        return sequences, memory

    def build(self, input_shape):
        sequences_shape, memory_shape = self._split_inputs(input_shape)
        if memory_shape is not None:
            self.cell._set_memory_dim(memory_shape[-1])
        self.rnn.build(tuple(sequences_shape))
        self.built = True

    def call(
        self, inputs, initial_state=None, mask=None, memory_mask=None, training=None
    ):
        sequences, memory = self._split_inputs(inputs)
        sequence_mask = None
        if isinstance(mask, (list, tuple)):
            sequence_mask = mask[0]
            if memory_mask is None and len(mask) > 1:
                memory_mask = mask[1]
        elif mask is not None:
            sequence_mask = mask
        batch_size = ops.shape(sequences)[0]
        if memory is None:
            states = self.cell.get_initial_state_self(batch_size, initial_state)
        else:
            states = self.cell.get_initial_state_with_memory(
                memory, memory_mask, initial_state
            )
        outputs, *final = self.rnn(
            sequences, initial_state=states, mask=sequence_mask, training=training
        )
        results = [outputs]
        if self.cell.return_alignments:
            results = list(self.cell.split_output(outputs))
        if self.return_state:
            results += final[1 : 1 + len(self.cell._cell_state_sizes)]
        return results[0] if len(results) == 1 else results

    def compute_output_spec(self, inputs, initial_state=None, **kwargs):
        sequences, memory = self._split_inputs(inputs)
        batch, steps = sequences.shape[0], sequences.shape[1]
        time = (batch, steps) if self.return_sequences else (batch,)
        cell = self.cell
        dtype = self.compute_dtype
        specs = [keras.KerasTensor((*time, cell._base_output_size), dtype=dtype)]
        if cell.return_alignments:
            length = cell.max_length if memory is None else memory.shape[1]
            specs.append(keras.KerasTensor((*time, length), dtype="float32"))
        if self.return_state:
            specs += [
                keras.KerasTensor((batch, s), dtype=dtype)
                for s in cell._cell_state_sizes
            ]
        return specs[0] if len(specs) == 1 else specs

    def compute_mask(self, inputs, mask=None):
        sequence_mask = mask[0] if isinstance(mask, (list, tuple)) else mask
        output_mask = sequence_mask if self.return_sequences else None
        masks = [output_mask]
        if self.cell.return_alignments:
            masks.append(output_mask)
        if self.return_state:
            masks += [None] * len(self.cell._cell_state_sizes)
        return masks[0] if len(masks) == 1 else masks

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "cell": keras.saving.serialize_keras_object(self.cell),
                "return_sequences": self.return_sequences,
                "return_state": self.return_state,
                "go_backwards": self.go_backwards,
                "unroll": self.unroll,
                "zero_output_for_mask": self.zero_output_for_mask,
            }
        )
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        config["cell"] = _deserialize(config["cell"], custom_objects)
        return cls(**config)
