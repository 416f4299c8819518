"""RNN cells that attend at every step: Bahdanau, Luong and self-attention.

`AttentionCellWrapper` wraps any Keras RNN cell (`LSTMCell`, `GRUCell`,
`SimpleRNNCell`, ...) and any `BaseAttention` layer. Its `style` picks, in
`__init__`, the style object (`keras_attn.recurrent.styles`) that holds what
the styles do differently:

* `"bahdanau"`: attends with the previous state, before the cell.
* `"luong"`: attends with the new state, after the cell, and feeds the
  attentional state back into the next input (TFA's `AttentionWrapper`).
* `"self"`: attends over the cell's own earlier states.

`BahdanauAttentionCell`, `LuongAttentionCell` and `SelfAttentionCell`
(`keras_attn.recurrent.cells`) are the same cell with the style fixed and the
style's arguments in their signatures.

The memory travels in the cell's states (`keras_attn.recurrent.memory_states`,
with the coverage of a coverage attention). A loop that runs the cell itself
passes the memory read out of the states once to every step
(`call(..., memory=cell.memory_from_states(states))`), so nothing of a call
is kept on the layer and one cell runs any number of loops at once. The
first state is always the cell's last output, which the JAX loop repeats at
masked steps.
"""

import keras
from keras import ops, tree

from keras_attn.arguments import check_constructor, deserialize_layer
from keras_attn.layers.base import BaseAttention
from keras_attn.layers.masking import as_dtype, check_mask, keras_mask
from keras_attn.recurrent.dropout_masks import draw_dropout_masks
from keras_attn.recurrent.memory_states import (
    MEMORY_STATES,
    add_to_coverage,
    has_coverage,
    initial_memory_states,
    memory_state_sizes,
    read_coverage,
    read_memory,
)
from keras_attn.recurrent.styles import (
    STYLE_OBJECTS,
    AttentionalStateStyle,
    drop_other_styles_arguments,
    take_style_arguments,
)
from keras_attn.recurrent.wrapped_cell import (
    calls_cell_directly,
    flat_size,
    flat_states,
    initial_cell_states,
)

STYLES = tuple(STYLE_OBJECTS)


def _is_pair_of_shapes(shape):
    """Whether `shape` is `[step_shape, memory_shape]`, not one shape."""
    return isinstance(shape, (list, tuple)) and any(
        isinstance(d, (list, tuple)) for d in shape
    )


@keras.saving.register_keras_serializable(package="keras_attn")
class AttentionCellWrapper(keras.layers.Layer):
    """Wraps an RNN cell so that it attends at every step.

    `style` picks what a step does; each style also has a class of its own,
    with its arguments in its signature (same weights, states and outputs):

    * `style="bahdanau"`: as `BahdanauAttentionCell`.
    * `style="luong"` (the default): as `LuongAttentionCell`.
    * `style="self"`: as `SelfAttentionCell`.

    With `s_t` the wrapped cell's output (its hidden state), `y_t` the step
    input and `c_t` the attention context, every style computes
    `s_t = cell(s_{t-1}, ...)` and `c_t = attend(query, memory)`; they differ
    in the query, the cell input and the output.

    With `return_alignments=True`, each step's output is `[out_t; alpha_t]`,
    the attention weights `alpha_t` `(batch, Tv)` concatenated after the
    output; `split_output` separates them. `AttentionRNN` does it for you.

    States (a flat list, all `(batch, n)`): the last output, the wrapped
    cell's states, then the style's own states (for a memory: the coverage
    with a `CoverageAttention`, then the flattened projected keys, the
    flattened memory values and the memory mask as 0/1 floats).

    With a `CoverageAttention` (See et al. 2017) the cell carries the
    coverage, the sum of the earlier steps' weights, which enters each
    step's score: the attention cannot repeat what it has covered, in
    training (`AttentionRNN`) as in a search, whose beams reorder it.

    Args:
        cell: A Keras RNN cell (a layer with `state_size` and
            `call(inputs, states)`), or its serialized config.
        attention: A `BaseAttention` layer (or its config).
        style: `"bahdanau"`, `"luong"` or `"self"`. A class of one style
            takes only its own style (or None).
        memory_dim: Last dimension of the memory. Inferred by
            `get_initial_state_with_memory` (or `AttentionRNN.build`) if not
            given; it is saved in the config.
        return_alignments: Append the attention weights to each output.
        **kwargs: The style's arguments (those of its class: e.g.
            `attention_units` for `"luong"`, `max_length` for `"self"`),
            then base `Layer` arguments.

    Examples:
        >>> import keras
        >>> import numpy as np
        >>> from keras_attn import AttentionCellWrapper, DotAttention
        >>> rng = np.random.default_rng(0)
        >>> encoder_outputs = rng.random((2, 5, 64), dtype="float32")
        >>> memory_mask = np.array([[True] * 5, [True] * 3 + [False] * 2])
        >>> decoder_inputs = rng.random((2, 4, 8), dtype="float32")
        >>> h = c = np.zeros((2, 64), "float32")
        >>> cell = AttentionCellWrapper(
        ...     keras.layers.LSTMCell(64), DotAttention(), style="luong")
        >>> cell.build((None, 8))  # the step input's shape
        >>> states = cell.get_initial_state_with_memory(
        ...     encoder_outputs, memory_mask, initial_state=[h, c])
        >>> outputs = keras.layers.RNN(cell, return_sequences=True)(
        ...     decoder_inputs, initial_state=states)
        >>> tuple(outputs.shape)
        (2, 4, 64)
    """

    # The style a subclass fixes; None: chosen by the `style` argument.
    style = None

    def __init__(
        self,
        cell,
        attention,
        style=None,
        memory_dim=None,
        return_alignments=False,
        **kwargs,
    ):
        given = {"cell": cell, "attention": attention, "style": style}
        given.update(memory_dim=memory_dim, return_alignments=return_alignments)
        check_constructor(type(self), (), {**given, **kwargs}, "cell")
        style = self._resolve_style(style)
        arguments = take_style_arguments(style, kwargs)
        super().__init__(**kwargs)
        self.style = style.name
        self._style = style
        cell = deserialize_layer(cell)
        attention = deserialize_layer(attention)
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
        if not style.uses_memory and has_coverage(attention):
            raise ValueError(
                f'A coverage attention sums the weights over a memory; style="'
                f"{style.name}\" attends over the cell's own states, a new "
                f"memory at each step. Received: attention={attention!r}"
            )
        self.cell = cell
        self.attention = attention
        self.memory_dim = memory_dim
        self.return_alignments = return_alignments
        self._cell_state_sizes = flat_size(cell.state_size)
        self._cell_nested_state = isinstance(cell.state_size, (list, tuple))
        # A cell whose states nest (a `StackedRNNCells` with an `LSTMCell`:
        # a list within the list) takes them back in its `state_size`'s shape.
        self._cell_state_structure = None
        if self._cell_nested_state and len(self._cell_state_sizes) != len(
            cell.state_size
        ):
            self._cell_state_structure = cell.state_size
        self.units = getattr(cell, "output_size", None)
        if not isinstance(self.units, int):
            self.units = self._cell_state_sizes[0]
        self._memory_length = None
        self._key_dim = None
        self._input_dim = None
        self._direct_cell_call = None
        # `W_c` of the Luong and self styles, which set it in `configure`.
        self._output_kernel = None
        self.supports_masking = True
        style.configure(self, **arguments)

    def _resolve_style(self, style):
        """The style object of `style`, or of the class's fixed style."""
        fixed = type(self).style
        if fixed is not None and style not in (None, fixed):
            raise ValueError(
                f"{self.__class__.__name__} has style={fixed!r}. "
                f"Received: style={style!r}"
            )
        style = style or fixed or "luong"
        if style not in STYLE_OBJECTS:
            raise ValueError(
                f"`style` must be one of {STYLES}. Received: style={style!r}"
            )
        return STYLE_OBJECTS[style]

    @property
    def _base_output_size(self):
        """Width of the output, without the alignments."""
        return self._style.base_output_size(self)

    # ----------------------------------------------------------- sizes

    @property
    def output_size(self):
        if not self.return_alignments:
            return self._base_output_size
        if self._memory_length is None:
            return None
        return self._base_output_size + self._memory_length

    @property
    def carries_coverage(self):
        """Whether the states carry a coverage (See et al. 2017): the cell
        attends over a memory with an attention that has `coverage_step`
        (`CoverageAttention`), and adds each step's weights to it."""
        return self._style.uses_memory and has_coverage(self.attention)

    @property
    def state_size(self):
        extra = self._style.extra_state_sizes(self)
        if self._style.uses_memory:
            extra = extra[:-MEMORY_STATES]
            extra += memory_state_sizes(self.carries_coverage)
        return [self.output_size, *self._cell_state_sizes, *extra]

    # ----------------------------------------------------------- build

    def build(self, input_shape):
        """Creates the weights of the cell, the attention and the output.

        Args:
            input_shape: The step input's shape `(batch, input_dim)`, or
                `[(batch, input_dim), (batch, Tv, memory_dim)]` with the
                memory's. Every weight is made here when the memory's width
                is known (from this, `memory_dim` or `AttentionRNN`);
                otherwise the wrapped cell, the attention and the output
                kernel, sub-layers of their own, are built by the first
                `get_initial_state_with_memory`. Only a static `Tv` here
                sets `output_size` (with `return_alignments=True`).
        """
        if _is_pair_of_shapes(input_shape):
            input_shape, memory_shape = input_shape
            self._set_memory_dim(memory_shape[-1])
            self._memory_length = memory_shape[1]
        self._input_dim = int(input_shape[-1])
        if self.memory_dim is not None:
            self._build_with_memory()
        self.built = True

    def _build_with_memory(self):
        """Builds cell, attention and output weights once the memory is known."""
        if self._key_dim is not None:
            return
        if self._input_dim is None:
            raise ValueError(
                f"{self.__class__.__name__} is not built: it is built by "
                "`keras.layers.RNN` (or `AttentionRNN`) from the step input "
                "shape."
            )
        if not self.cell.built:
            self.cell.build((None, self._style.cell_input_dim(self)))
        if not self.attention.built:
            self.attention.build(
                [(None, self._style.query_dim(self)), (None, None, self.memory_dim)]
            )
        self._style.build_output_layer(self)
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

    def _draw_dropout_masks(self, batch_size):
        """Draws the wrapped cell's dropout masks for a batch.

        Called with the initial states of a training pass, from which every
        loop starts, so the masks are drawn before it
        (`keras_attn.recurrent.dropout_masks`), at the width of the cell's input:
        inside JAX's `scan` a mask the cell drew itself would be a tracer of
        the loop kept on the layer. Inference draws none: a step-by-step
        decoder under `jax.jit` would otherwise advance the seed's state
        outside Keras' stateless calls.
        """
        if self._input_dim is not None:
            draw_dropout_masks(self.cell, batch_size, self._style.cell_input_dim(self))

    def _check_cell_states(self, initial_state, batch_size, dtype):
        if initial_state is None:
            return initial_cell_states(
                self.cell, self._cell_state_sizes, batch_size, dtype
            )
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
        if self._style.uses_memory:
            raise ValueError(
                f'style="{self.style}" attends over a memory: pass '
                "`initial_state=cell.get_initial_state_with_memory(memory, "
                "memory_mask, initial_state)` to `keras.layers.RNN`, or use "
                "`AttentionRNN` with inputs `[sequences, memory]`."
            )
        states = self.get_initial_state_self(batch_size)
        # `keras.layers.RNN` calls it inside its own `call`, before its loop,
        # where it draws its own cell's masks too, training or not.
        self._draw_dropout_masks(batch_size)
        return states

    def get_initial_state_self(self, batch_size, initial_state=None, training=None):
        """Initial states of a `style="self"` cell (which has no memory).

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
        if self._style.uses_memory:
            raise ValueError(
                f'`get_initial_state_self` is for style="self". This cell has '
                f'style="{self.style}": use `get_initial_state_with_memory`.'
            )
        return self._style.initial_states(self, batch_size, initial_state, training)

    def get_initial_state_with_memory(
        self, memory, memory_mask=None, initial_state=None, training=None
    ):
        """Projects the memory once and returns the initial states.

        Call it where the memory is a real tensor: eagerly, or inside a
        layer's `call` (`AttentionRNN` does that for functional models).

        Args:
            memory: Encoder outputs, `(batch, Tv, memory_dim)`.
            memory_mask: Optional boolean `(batch, Tv)`; False marks padding
                (zero attention weight). Defaults to the mask Keras propagated
                with `memory` (an `Embedding(mask_zero=True)` upstream).
            initial_state: Optional initial state(s) of the wrapped cell, e.g.
                the encoder's final `[h, c]`; zeros if None.
            training: Whether the states start a training pass: then the
                wrapped cell's dropout masks, if it has dropout, are drawn
                here, before the loop (which JAX's `scan` needs). Pass the
                `training` of the call that runs `keras.layers.RNN`;
                `AttentionRNN` passes its own. Inference draws none.

        Returns:
            The list of initial states, to pass as `initial_state` to
            `keras.layers.RNN(cell)`.
        """
        if not self._style.uses_memory:
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
        if memory_mask is None:
            memory_mask = keras_mask(memory)
        check_mask(memory_mask, "memory_mask", memory)
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
        prepared = self.attention.prepare_memory(memory, value_mask=memory_mask)
        if training:
            self._draw_dropout_masks(batch_size)
        output = ops.zeros((batch_size, self._base_output_size), dtype=dtype)
        if self.return_alignments:
            alignments = ops.zeros_like(prepared.mask, dtype=dtype)
            output = ops.concatenate([output, alignments], axis=-1)
        return [
            output,
            *self._check_cell_states(initial_state, batch_size, dtype),
            *self._style.initial_step_states(self, batch_size, dtype),
            *initial_memory_states(
                self.attention, prepared, memory, dtype, self.carries_coverage
            ),
        ]

    # ----------------------------------------------------------- step

    def split_output(self, outputs):
        """Splits `[out; alpha]` outputs of `return_alignments=True`.

        Args:
            outputs: `(..., output_size)` outputs of the RNN.

        Returns:
            `(outputs, alignments)`: `(..., out_dim)` and float32 `(..., Tv)`.
        """
        if not self.return_alignments:
            raise ValueError(
                f"`split_output` needs a {self.__class__.__name__} built with "
                "`return_alignments=True`: without it the outputs hold no "
                "alignments. Received: return_alignments=False"
            )
        size = self._base_output_size
        return outputs[..., :size], ops.cast(outputs[..., size:], "float32")

    def _call_cell(self, inputs, states, training):
        if self._cell_state_structure is not None:
            states = tree.pack_sequence_as(self._cell_state_structure, list(states))
        else:
            states = list(states) if self._cell_nested_state else states[0]
        kwargs = {}
        if getattr(self.cell, "_call_has_training_arg", False):
            kwargs["training"] = training
        if self._direct_cell_call is None:
            self._direct_cell_call = calls_cell_directly(self.cell, self.compute_dtype)
        call = self.cell.call if self._direct_cell_call else self.cell
        output, new_states = call(inputs, states, **kwargs)
        return output, flat_states(new_states)

    def memory_from_states(self, states):
        """The `AttentionMemory` a full list of states carries.

        A loop that runs the cell itself reads it once and passes it to every
        step (`call(inputs, states, memory=...)`): the memory states pass
        through the steps unchanged.

        Args:
            states: The cell's flat states, from
                `get_initial_state_with_memory` or a step.

        Returns:
            `AttentionMemory(keys, values, mask)`, `(batch, Tv, key_dim)`,
            `(batch, Tv, memory_dim)` and boolean `(batch, Tv)`; None for
            `style="self"`, which attends over its own earlier states, new
            at every step.
        """
        if not self._style.uses_memory:
            return None
        return read_memory(states, self._key_dim, self.memory_dim)

    def call(self, inputs, states, training=None, memory=None):
        """One step: `(output, new_states)`.

        Args:
            inputs: The step input `y_t`, `(batch, input_dim)`.
            states: The flat states of the previous step.
            training: Whether dropout applies.
            memory: Optional `memory_from_states(states)`, read once by a
                loop for all its steps; read from `states` if None.
        """
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
        if self.return_alignments:
            prev_output = prev_output[:, : self._base_output_size]
        if memory is None:
            memory = self.memory_from_states(states)
        score = {}
        if self.carries_coverage:
            score["coverage"] = read_coverage(states)
        output, weights, new_cell, new_extra = self._style.step(
            self,
            inputs,
            prev_output,
            cell_states,
            states[1 + num_cell :],
            memory,
            training,
            score,
        )
        if self.carries_coverage:
            new_extra = add_to_coverage(new_extra, score["coverage"], weights)
        output = as_dtype(output, states[0].dtype)
        if self.return_alignments:
            output = ops.concatenate([output, ops.cast(weights, output.dtype)], axis=-1)
        new_cell = [
            as_dtype(s, c.dtype) for s, c in zip(new_cell, cell_states, strict=True)
        ]
        return output, [output, *new_cell, *new_extra]

    # ----------------------------------------------------------- W_c

    def attentional_state(self, context, state):
        """`h~_t` from the context and the wrapped cell's output: `act(W_c
        [c_t; s_t])` (Luong and self styles; `c_t` without `W_c`). Any
        leading axes: one step `(batch, d)` or all steps `(batch, T, d)`."""
        if not isinstance(self._style, AttentionalStateStyle):
            raise ValueError(
                "`attentional_state` needs a Luong or self style, which "
                "combine the context and the state; this style outputs the "
                f"cell's state. Received: style={self.style!r}"
            )
        return self._style.attentional_state(self, context, state)

    @property
    def attention_kernel(self):
        """`W_c`, `(memory_dim + units, attention_units)`: Luong and self styles."""
        if self._output_kernel is None:
            raise AttributeError(
                f'style="{self.style}" has no `attention_kernel`: no `W_c`, or '
                "an `attention_layer` in its place."
            )
        return self._output_kernel.kernel

    def save_own_variables(self, store):
        super().save_own_variables(store)
        if self._output_kernel is not None and self._output_kernel.built:
            store["0"] = self._output_kernel.kernel

    def load_own_variables(self, store):
        # `keys()`: the H5 store of Keras 3.5 has no `in`.
        if self._output_kernel is not None and "0" in store.keys():
            if not self._output_kernel.built:
                self._output_kernel.build((None, store["0"].shape[0]))
            self._output_kernel.kernel.assign(store["0"])

    # ----------------------------------------------------------- config

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "cell": keras.saving.serialize_keras_object(self.cell),
                "attention": keras.saving.serialize_keras_object(self.attention),
                "style": self.style,
                # A self-attentive cell's memory is its own states.
                "memory_dim": self.memory_dim if self._style.uses_memory else None,
                "return_alignments": self.return_alignments,
                **self._style.config(self),
            }
        )
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        config["cell"] = deserialize_layer(config["cell"], custom_objects)
        config["attention"] = deserialize_layer(config["attention"], custom_objects)
        style = config.get("style") or cls.style or "luong"
        return cls(**drop_other_styles_arguments(config, style))
