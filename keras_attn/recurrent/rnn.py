"""`AttentionRNN`: an attention cell run over a sequence, in functional models.

The cells themselves (`AttentionCellWrapper` and its per-style classes) are in
`keras_attn.recurrent.wrapper` (the base class) and `keras_attn.recurrent.cells`
(one class per style); they are imported here too.

`AttentionRNN` takes `[sequences, memory]`, builds the cell's initial state
inside its own `call` (so the projection of the memory is part of the model
graph and serializes) and can return the alignment history separately.
"""

import keras
from keras import ops

from keras_attn.arguments import CheckedConstructor, deserialize_layer
from keras_attn.layers.masking import keras_mask
from keras_attn.recurrent.cells import (
    BahdanauAttentionCell,
    LuongAttentionCell,
    SelfAttentionCell,
)
from keras_attn.recurrent.dropout_masks import reset_dropout_masks
from keras_attn.recurrent.time_loop import attention_loop, loop_calls_cell_directly
from keras_attn.recurrent.wrapper import STYLES, AttentionCellWrapper


def _is_shape(x):
    return all(d is None or isinstance(d, int) for d in x)


@keras.saving.register_keras_serializable(package="keras_attn")
class AttentionRNN(CheckedConstructor, keras.layers.Layer):
    """Runs an `AttentionCellWrapper` over a sequence, attending over a memory.

    The functional-model way to use the cell: the memory is projected once,
    inside this layer's `call`, and the alignment history comes back as its
    own output when the cell has `return_alignments=True`. On torch the
    layer runs the time loop itself (`keras_attn.recurrent.time_loop`), with the
    outputs and gradients of `keras.layers.RNN`'s; elsewhere, or under
    mixed precision, it runs `keras.layers.RNN`.

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
            When Keras does not fill it (a call with `initial_state`), the
            masks the sequences and the memory carry are used.
        memory_mask: Optional boolean `(batch, Tv)`; overrides the propagated
            memory mask. A vector of lengths is refused:
            `keras.ops.arange(Tv)[None] < lengths[:, None]` is its mask.
        training: Passed to the cell and the attention (dropout).

    Returns:
        `outputs`: `(batch, T, out_dim)` (or `(batch, out_dim)`); then, if
        `cell.return_alignments`, the float32 alignments `(batch, T, Tv)`
        (`(batch, T, max_length)` for `"self"`, oldest state first); then, if
        `return_state`, the wrapped cell's final states.

    Examples:
        >>> import keras
        >>> import numpy as np
        >>> from keras_attn import AttentionCellWrapper, AttentionRNN, BahdanauAttention
        >>> rng = np.random.default_rng(0)
        >>> decoder_embeddings = rng.random((2, 4, 8), dtype="float32")
        >>> encoder_outputs = rng.random((2, 6, 16), dtype="float32")
        >>> encoder_h = rng.random((2, 64), dtype="float32")
        >>> cell = AttentionCellWrapper(keras.layers.GRUCell(64),
        ...     BahdanauAttention(32), style="bahdanau", return_alignments=True)
        >>> outputs, alignments = AttentionRNN(cell)(
        ...     [decoder_embeddings, encoder_outputs], initial_state=encoder_h)
        >>> tuple(outputs.shape), tuple(alignments.shape)
        ((2, 4, 64), (2, 4, 6))
    """

    tfa_names = "cell"

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
        cell = deserialize_layer(cell)
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
        """The `AttentionCellWrapper` this layer runs, with its weights.

        The way back from a trained or reloaded model to step-by-step
        decoding: `model.get_layer(name).cell` shares its weights with the
        model, so `cell.get_initial_state_with_memory(memory, memory_mask,
        initial_state)` and then `cell(step_inputs, states)` decode one token
        at a time with them (docs/tfa-migration.md, "Inference after
        reload").

        Examples:
            >>> import keras
            >>> import numpy as np
            >>> from keras_attn import AttentionCellWrapper, AttentionRNN, DotAttention
            >>> rng = np.random.default_rng(0)
            >>> memory = rng.random((2, 5, 16), dtype="float32")
            >>> layer = AttentionRNN(AttentionCellWrapper(
            ...     keras.layers.GRUCell(16), DotAttention(), style="luong"))
            >>> _ = layer([rng.random((2, 4, 8), dtype="float32"), memory])
            >>> cell = layer.cell
            >>> states = cell.get_initial_state_with_memory(memory)
            >>> output, states = cell(rng.random((2, 8), dtype="float32"), states)
            >>> tuple(output.shape)
            (2, 16)
        """
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
        if memory_shape is not None and not self.cell.built:
            # The memory's shape builds every weight (and `output_size`).
            step_shape = (sequences_shape[0], *sequences_shape[2:])
            self.cell.build([step_shape, tuple(memory_shape)])
        elif memory_shape is not None:
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
        # Keras fills `mask` only for a call whose one tensor argument is
        # `inputs`; with `initial_state` the tensors still carry their masks.
        if sequence_mask is None:
            sequence_mask = keras_mask(sequences)
        if memory_mask is None:
            memory_mask = keras_mask(memory)
        batch_size = ops.shape(sequences)[0]
        if memory is None:
            states = self.cell.get_initial_state_self(
                batch_size, initial_state, training=training
            )
        else:
            states = self.cell.get_initial_state_with_memory(
                memory, memory_mask, initial_state, training=training
            )
        try:
            outputs, final = self._run(sequences, states, sequence_mask, training)
        finally:
            reset_dropout_masks(self.cell.cell)
        results = [outputs]
        if self.cell.return_alignments:
            results = list(self.cell.split_output(outputs))
        if self.return_state:
            results += final[1 : 1 + len(self.cell._cell_state_sizes)]
        return results[0] if len(results) == 1 else results

    def _run(self, sequences, states, mask, training):
        """`(outputs, final_states)` of the cell over `sequences`."""
        if loop_calls_cell_directly(self.cell):
            return attention_loop(
                self.cell,
                sequences,
                states,
                mask=mask,
                training=training,
                go_backwards=self.go_backwards,
                return_sequences=self.return_sequences,
                zero_output_for_mask=self.zero_output_for_mask,
            )
        outputs, *final = self.rnn(
            sequences, initial_state=states, mask=mask, training=training
        )
        return outputs, final

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
        if sequence_mask is None:
            sequence_mask = keras_mask(self._split_inputs(inputs)[0])
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
        config["cell"] = deserialize_layer(config["cell"], custom_objects)
        return cls(**config)


__all__ = [
    "STYLES",
    "AttentionCellWrapper",
    "AttentionRNN",
    "BahdanauAttentionCell",
    "LuongAttentionCell",
    "SelfAttentionCell",
]
