"""Recurrent Entity Networks (Henaff, Weston, Szlam, Bordes, LeCun 2017).

Attention that *writes*: a memory of `N` slots `h_j`, each with a learned key
`w_j`, is updated by every input sentence `s` through a gate that is a soft
attention over the slots, and read once at the end by a question `q`:

* `PositionEncoder`: a sentence's word embeddings `e_i` summed with a learned
  multiplicative position mask, `s = sum_i f_i * e_i`.
* `EntityMemoryCell` (a cell for `keras.layers.RNN`), per sentence `s`:

      g_j  = sigmoid(s . h_j + s . w_j)
      h~_j = phi(U h_j + V w_j + W s)
      h_j <- h_j + g_j * h~_j
      h_j <- h_j / ||h_j||

  with `U, V, W` shared by the slots and `phi` a PReLU.
* `EntityOutput`: `p = softmax(q . h_j)`, `u = sum_j p_j h_j`,
  `y = R phi(q + H u)`.

A story of `T` sentences of `L` words goes `(batch, T, L, d)` embeddings ->
`PositionEncoder` -> `(batch, T, d)` (with a sentence mask: a sentence whose
words are all padding is masked) -> `keras.layers.RNN(EntityMemoryCell)` ->
the final memory `(batch, N * d)`, where a masked sentence leaves the memory
unchanged -> `EntityOutput([query_encoding, memory])`.

The memory state is flat, `(batch, N * d)`, like the states of
`keras_attn.recurrent.rnn`: the JAX and PyTorch RNN loops broadcast the step mask
`(batch, 1)` against every state. `AttentionRNN` does not apply: it runs an
`AttentionCellWrapper` over a separate memory, where this cell's attention is
over its own state.
"""

import keras
from keras import ops

# Keeps the normalisation finite for an all-zero slot (it has no direction).
_NORM_EPSILON = 1e-12


def _prelu(x, alpha):
    return ops.maximum(x, 0.0) + ops.cast(alpha, x.dtype) * ops.minimum(x, 0.0)


def _check_positive_int(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(
            f"`{name}` must be a positive integer. Received: {name}={value!r}"
        )


@keras.saving.register_keras_serializable(package="keras_attn")
class PositionEncoder(keras.layers.Layer):
    """Sentence encoding by a learned multiplicative position mask.

    `s = sum_i f_i * e_i` over the words `i` of a sentence, with `f_i` a
    learned vector per word position (Henaff et al. 2017, section 2.1; Sukhbaatar
    et al. 2015 fix `f` instead). Padded words (mask False) add nothing.

    Args:
        max_words: The number of word positions `L` (the mask's length).
        mask_initializer: Initializer of `f`, `(L, d)`. Ones: a bag of words.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: Word embeddings `(batch, ..., L, d)`, e.g. `(batch, T, L, d)`
            for a story, `(batch, L, d)` for a question.
        mask: Optional boolean `(batch, ..., L)`, False for padded words;
            propagated from `Embedding(mask_zero=True)`.

    Returns:
        `(batch, ..., d)`. Its mask (`compute_mask`) is True where the
        sentence has at least one word, so that `keras.layers.RNN` skips padded
        sentences.

    Examples:
        >>> import keras
        >>> import numpy as np
        >>> from keras_attn import PositionEncoder
        >>> story = np.array([[[3, 1, 0], [2, 0, 0]]])  # (batch, T, L) ids, 0: padding
        >>> words = keras.layers.Embedding(10, 100, mask_zero=True)(story)
        >>> sentences = PositionEncoder(max_words=3)(words)
        >>> tuple(sentences.shape)
        (1, 2, 100)
    """

    def __init__(self, max_words, mask_initializer="ones", **kwargs):
        super().__init__(**kwargs)
        _check_positive_int("max_words", max_words)
        self.max_words = max_words
        self.mask_initializer = keras.initializers.get(mask_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        if input_shape[-2] is not None and input_shape[-2] != self.max_words:
            raise ValueError(
                f"`inputs` must have {self.max_words} word positions "
                f"(max_words) on axis -2. Received: input_shape={input_shape}"
            )
        self.position_mask = self.add_weight(
            name="position_mask",
            shape=(self.max_words, int(input_shape[-1])),
            initializer=self.mask_initializer,
        )
        self.built = True

    def call(self, inputs, mask=None):
        weighted = inputs * ops.cast(self.position_mask, inputs.dtype)
        if mask is not None:
            weighted = weighted * ops.cast(mask, inputs.dtype)[..., None]
        return ops.sum(weighted, axis=-2)

    def compute_mask(self, inputs, mask=None):
        if mask is None:
            return None
        return ops.any(mask, axis=-1)

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-2], input_shape[-1])

    def get_config(self):
        return {
            **super().get_config(),
            "max_words": self.max_words,
            "mask_initializer": keras.initializers.serialize(self.mask_initializer),
        }


@keras.saving.register_keras_serializable(package="keras_attn")
class EntityMemoryCell(keras.layers.Layer):
    """The dynamic memory of a Recurrent Entity Network, a cell for `RNN`.

    `N = num_slots` slots `h_j` of width `units`, each with a learned key
    `w_j`. For a step input `s` `(batch, units)`:
    `g_j = sigmoid(s . h_j + s . w_j)`, `h~_j = phi(U h_j + V w_j + W s)`,
    `h_j <- normalize(h_j + g_j * h~_j)`, with `phi` a PReLU of learned slope
    `alpha` per unit. The gate is the slot's attention to the sentence: the
    content term `s . h_j` finds the slot that holds an entity, the location
    term `s . w_j` the slot that is keyed to it.

    With `use_bias=True` the gate gets a learned bias per slot and the
    candidate one per unit, `g_j = sigmoid(s . h_j + s . w_j + b_j)` and
    `h~_j = phi(U h_j + V w_j + W s + c)`, as in the authors' code
    (`nn.Add(memslots)` and the bias of `U`); the paper's equations have
    neither.

    The memory starts at the keys, `h_j = w_j` (`initial_state="zeros"`
    starts it empty). Vectors are rows: `U h_j` is computed as `h_j @ U`.
    The PReLU slope starts at 1, so `phi` starts as the identity.

    State: one flat `(batch, num_slots * units)` tensor, slot `j` in columns
    `j * units : (j + 1) * units`. Output per step: the new memory, or with
    `return_gates=True` the gates `g` `(batch, num_slots)` (to see which slots
    each sentence wrote to; the memory is then the RNN's final state).

    Args:
        num_slots: Number of memory slots `N`.
        units: Width of a slot; the step input must have the same width.
        initial_state: `"keys"` or `"zeros"`.
        return_gates: Output the gates instead of the memory.
        use_bias: Add the gate's per-slot bias and the candidate's bias.
        key_initializer: Initializer of the keys `(N, units)`.
        kernel_initializer: Initializer of `U`, `V` and `W` `(units, units)`.
        alpha_initializer: Initializer of the PReLU slope `(units,)`.
        bias_initializer: Initializer of both biases (with `use_bias`).
        **kwargs: Base `Layer` arguments.

    Examples:
        >>> import keras
        >>> import numpy as np
        >>> from keras_attn import EntityMemoryCell
        >>> sentences = np.random.default_rng(0).random((2, 7, 100), dtype="float32")
        >>> cell = EntityMemoryCell(num_slots=20, units=100)
        >>> memory = keras.layers.RNN(cell)(sentences)
        >>> tuple(memory.shape)
        (2, 2000)
        >>> tuple(cell.unflatten(memory).shape)
        (2, 20, 100)
    """

    def __init__(
        self,
        num_slots,
        units,
        initial_state="keys",
        return_gates=False,
        use_bias=False,
        key_initializer=None,
        kernel_initializer=None,
        alpha_initializer="ones",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        _check_positive_int("num_slots", num_slots)
        _check_positive_int("units", units)
        if initial_state not in ("keys", "zeros"):
            raise ValueError(
                '`initial_state` must be "keys" or "zeros". Received: '
                f"initial_state={initial_state!r}"
            )
        self.num_slots = num_slots
        self.units = units
        self.initial_state = initial_state
        self.return_gates = return_gates
        self.use_bias = use_bias
        # Small weights (std 0.1, as in the paper): the memory starts near its
        # keys instead of being swamped by the first sentence.
        default = keras.initializers.RandomNormal(stddev=0.1)
        self.key_initializer = keras.initializers.get(key_initializer or default)
        self.kernel_initializer = keras.initializers.get(kernel_initializer or default)
        self.alpha_initializer = keras.initializers.get(alpha_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.state_size = num_slots * units
        self.output_size = num_slots if return_gates else num_slots * units

    def build(self, input_shape):
        if input_shape[-1] != self.units:
            raise ValueError(
                f"`inputs` must have last dimension units={self.units} (the "
                f"sentence encoding is dotted with the slots). Received: "
                f"input_shape={input_shape}"
            )
        square = (self.units, self.units)
        self.keys = self.add_weight(
            name="keys",
            shape=(self.num_slots, self.units),
            initializer=self.key_initializer,
        )
        self.slot_kernel = self.add_weight(  # U
            name="slot_kernel", shape=square, initializer=self.kernel_initializer
        )
        self.key_kernel = self.add_weight(  # V
            name="key_kernel", shape=square, initializer=self.kernel_initializer
        )
        self.input_kernel = self.add_weight(  # W
            name="input_kernel", shape=square, initializer=self.kernel_initializer
        )
        self.alpha = self.add_weight(
            name="alpha", shape=(self.units,), initializer=self.alpha_initializer
        )
        if self.use_bias:
            self.gate_bias = self.add_weight(
                name="gate_bias",
                shape=(self.num_slots,),
                initializer=self.bias_initializer,
            )
            self.bias = self.add_weight(
                name="bias", shape=(self.units,), initializer=self.bias_initializer
            )
        self.built = True

    def unflatten(self, memory):
        """`(batch, N * units)` memory to `(batch, N, units)` slots."""
        return ops.reshape(memory, (-1, self.num_slots, self.units))

    def get_initial_state(self, batch_size=None):
        if self.initial_state == "zeros":
            return [ops.zeros((batch_size, self.state_size), dtype=self.compute_dtype)]
        keys = ops.reshape(ops.cast(self.keys, self.compute_dtype), (1, -1))
        return [ops.repeat(keys, batch_size, axis=0)]

    def _gates(self, inputs, slots, keys):
        """`g_j = sigmoid(s . h_j + s . w_j)`, `(batch, N)`; a hook."""
        content = ops.einsum("bd,bnd->bn", inputs, slots)
        location = ops.matmul(inputs, ops.transpose(keys))
        if self.use_bias:
            location = location + ops.cast(self.gate_bias, inputs.dtype)
        return ops.sigmoid(content + location)

    def _candidates(self, inputs, slots, keys):
        """`h~_j = phi(U h_j + V w_j + W s)`, `(batch, N, units)`; a hook."""
        dtype = inputs.dtype
        pre = (
            ops.matmul(slots, ops.cast(self.slot_kernel, dtype))
            + ops.matmul(keys, ops.cast(self.key_kernel, dtype))[None]
            + ops.matmul(inputs, ops.cast(self.input_kernel, dtype))[:, None, :]
        )
        if self.use_bias:
            pre = pre + ops.cast(self.bias, dtype)
        return _prelu(pre, self.alpha)

    def call(self, inputs, states):
        memory = states[0] if isinstance(states, (list, tuple)) else states
        slots = self.unflatten(memory)
        keys = ops.cast(self.keys, inputs.dtype)
        gates = self._gates(inputs, slots, keys)
        slots = slots + gates[..., None] * self._candidates(inputs, slots, keys)
        # A product, not `ops.square`: on JAX that is `integer_pow`, whose
        # gradient XLA compiles far slower inside the RNN's loop
        # (docs/history.md, "Entity Networks").
        squared = ops.sum(slots * slots, axis=-1, keepdims=True)
        slots = slots * ops.rsqrt(ops.maximum(squared, _NORM_EPSILON))
        new_memory = ops.reshape(slots, ops.shape(memory))
        output = gates if self.return_gates else new_memory
        return output, [new_memory]

    def get_config(self):
        return {
            **super().get_config(),
            "num_slots": self.num_slots,
            "units": self.units,
            "initial_state": self.initial_state,
            "return_gates": self.return_gates,
            "use_bias": self.use_bias,
            "key_initializer": keras.initializers.serialize(self.key_initializer),
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "alpha_initializer": keras.initializers.serialize(self.alpha_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }


@keras.saving.register_keras_serializable(package="keras_attn")
class EntityOutput(keras.layers.Layer):
    """The output module of a Recurrent Entity Network.

    The question `q` attends over the final slots, `p = softmax(q . h_j)`,
    `u = sum_j p_j h_j`, and the answer's logits are `y = R phi(q + H u)`,
    with `phi` a PReLU of learned slope `alpha` per unit.

    Args:
        num_slots: Number of memory slots `N`.
        output_dim: Number of logits (the answer vocabulary).
        kernel_initializer: Initializer of `H` `(d, d)` and `R` `(d, output_dim)`.
        alpha_initializer: Initializer of the PReLU slope `(d,)`.
        slope_source: Optional layer with a PReLU slope `alpha` `(d,)`, e.g.
            the `EntityMemoryCell`: this layer then uses that slope and
            creates none, one set of slopes tied across the memory and the
            output as in the authors' code. A tied layer has no config
            (`get_config` raises): save its weights, not the model.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: `[query, memory]`: the encoded question `(batch, d)` and the
            memory, flat `(batch, N * d)` (an `EntityMemoryCell` state) or
            `(batch, N, d)`.
        return_attention_scores: Also return `p` `(batch, N)`.

    Returns:
        Logits `(batch, output_dim)`, and `p` if asked.

    Examples:
        >>> import numpy as np
        >>> from keras_attn import EntityOutput
        >>> rng = np.random.default_rng(0)
        >>> query = rng.random((2, 100), dtype="float32")
        >>> memory = rng.random((2, 20 * 100), dtype="float32")
        >>> logits = EntityOutput(num_slots=20, output_dim=30)([query, memory])
        >>> tuple(logits.shape)
        (2, 30)
    """

    def __init__(
        self,
        num_slots,
        output_dim,
        kernel_initializer=None,
        alpha_initializer="ones",
        slope_source=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        _check_positive_int("num_slots", num_slots)
        _check_positive_int("output_dim", output_dim)
        self.slope_source = slope_source
        self.num_slots = num_slots
        self.output_dim = output_dim
        self.kernel_initializer = keras.initializers.get(
            kernel_initializer or keras.initializers.RandomNormal(stddev=0.1)
        )
        self.alpha_initializer = keras.initializers.get(alpha_initializer)
        # The question's mask (from `PositionEncoder`) is consumed here.
        self.supports_masking = True

    def build(self, input_shape):
        query_shape, memory_shape = input_shape
        units = int(query_shape[-1])
        memory_width = memory_shape[-1]
        if len(memory_shape) == 2 and memory_width is not None:
            memory_width = memory_width // self.num_slots
            if memory_shape[-1] % self.num_slots:
                memory_width = None
        if memory_width != units:
            raise ValueError(
                f"`memory` must hold num_slots={self.num_slots} slots as wide as "
                f"the query ({units}). Received: input_shape={input_shape}"
            )
        self.units = units
        self.hidden_kernel = self.add_weight(  # H
            name="hidden_kernel",
            shape=(units, units),
            initializer=self.kernel_initializer,
        )
        self.output_kernel = self.add_weight(  # R
            name="output_kernel",
            shape=(units, self.output_dim),
            initializer=self.kernel_initializer,
        )
        if self.slope_source is None:
            self.alpha = self.add_weight(
                name="alpha", shape=(units,), initializer=self.alpha_initializer
            )
        self.built = True

    def _slope(self):
        if self.slope_source is None:
            return self.alpha
        return self.slope_source.alpha

    def call(self, inputs, return_attention_scores=False):
        query, memory = inputs
        slots = ops.reshape(memory, (-1, self.num_slots, self.units))
        slots = ops.cast(slots, query.dtype)
        weights = ops.softmax(ops.einsum("bd,bnd->bn", query, slots), axis=-1)
        read = ops.einsum("bn,bnd->bd", weights, slots)
        hidden = query + ops.matmul(read, ops.cast(self.hidden_kernel, query.dtype))
        logits = ops.matmul(
            _prelu(hidden, self._slope()), ops.cast(self.output_kernel, query.dtype)
        )
        if return_attention_scores:
            return logits, weights
        return logits

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        return (input_shape[0][0], self.output_dim)

    def compute_output_spec(self, inputs, return_attention_scores=False):
        query = inputs[0]
        batch = query.shape[0]
        logits = keras.KerasTensor((batch, self.output_dim), dtype=query.dtype)
        if return_attention_scores:
            return logits, keras.KerasTensor((batch, self.num_slots), query.dtype)
        return logits

    def get_config(self):
        if self.slope_source is not None:
            raise ValueError(
                "`slope_source` cannot be serialized: save the weights of a "
                "model with a tied slope. Received: "
                f"slope_source={self.slope_source.name!r}"
            )
        return {
            **super().get_config(),
            "num_slots": self.num_slots,
            "output_dim": self.output_dim,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "alpha_initializer": keras.initializers.serialize(self.alpha_initializer),
        }
