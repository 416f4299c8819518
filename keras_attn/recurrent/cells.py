"""The attention cells of each style: `AttentionCellWrapper` with its style fixed.

* `BahdanauAttentionCell`: attends with the previous state, before the cell.
* `LuongAttentionCell`: attends with the new state, after the cell, and feeds
  the attentional state back into the next input (TFA's `AttentionWrapper`).
* `SelfAttentionCell`: attends over the cell's own earlier states.

Each is `AttentionCellWrapper` with `style` fixed and the style's arguments
in its signature; what the style does is its style object's
(`keras_attn.recurrent.styles`), the same for `AttentionCellWrapper(...,
style=...)`.
"""

import keras

from keras_attn.recurrent.wrapper import AttentionCellWrapper


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


@keras.saving.register_keras_serializable(package="keras_attn")
class LuongAttentionCell(AttentionCellWrapper):
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
        input_feeding: If True (TFA's `AttentionWrapper`), the cell reads
            `[y_t; h~_{t-1}]`; if False, `y_t` alone: Luong et al.'s global
            attention without input feeding (OpenNMT's `input_feed 0`),
            whose attention never enters the recurrence, so a decoder may
            teacher-force the cell over the whole sequence first and attend
            over all steps at once.
        kernel_initializer: Initializer of `W_c`.
        attention_layer: A Keras layer with an int `units` (a `Dense`), or
            None: it makes `h~_t` from `[c_t; s_t]` in place of `W_c` and
            the activation (TFA's `attention_layer`); `h~_t` is then
            `(batch, units)`.
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
        input_feeding=True,
        attention_units=None,
        attention_activation="tanh",
        kernel_initializer="glorot_uniform",
        attention_layer=None,
        **kwargs,
    ):
        super().__init__(
            cell,
            attention,
            style,
            attention_layer=attention_layer,
            use_attention_layer=use_attention_layer,
            output_attention=output_attention,
            input_feeding=input_feeding,
            attention_units=attention_units,
            attention_activation=attention_activation,
            kernel_initializer=kernel_initializer,
            **kwargs,
        )


@keras.saving.register_keras_serializable(package="keras_attn")
class SelfAttentionCell(AttentionCellWrapper):
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
        attention_layer: A Keras layer with an int `units`, or None: it
            makes `h~_t` from `[c_t; s_t]` in place of `W_c` and the
            activation.
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

    def __init__(
        self,
        cell,
        attention,
        style=None,
        max_length=None,
        attention_units=None,
        attention_activation="tanh",
        kernel_initializer="glorot_uniform",
        attention_layer=None,
        **kwargs,
    ):
        super().__init__(
            cell,
            attention,
            style,
            attention_layer=attention_layer,
            max_length=max_length,
            attention_units=attention_units,
            attention_activation=attention_activation,
            kernel_initializer=kernel_initializer,
            **kwargs,
        )
