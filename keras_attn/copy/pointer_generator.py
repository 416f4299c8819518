"""The generation probability `p_gen` of a pointer-generator: its layer.

`p_gen = sigmoid(w_c . c_t + w_s . s_t + w_x . x_t + b)` is the soft switch
between generating from the vocabulary and copying from the source; the
distributions that mix the two are in `keras_attn.copy.distributions`.
"""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_attn")
class PointerGenerator(keras.layers.Layer):
    """The generation probability `p_gen` of a pointer-generator.

    `p_gen = sigmoid(w_c . c_t + w_s . s_t + w_x . x_t + b)`, from the
    attention context `c_t`, the decoder state `s_t` and the decoder input
    `x_t` (See et al. 2017, eq. 8). It is computed in float32 (its weights
    are never cast to a mixed-precision compute dtype) and returned as
    float32.

    Args:
        use_bias: Whether to add the bias `b`.
        kernel_initializer: Initializer of `w_c`, `w_s` and `w_x`.
        bias_initializer: Initializer of `b`.
        **kwargs: Base `Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `[context, state, decoder_input]` with shapes
            `(batch, [T,] context_dim)`, `(batch, [T,] state_dim)` and
            `(batch, [T,] input_dim)` (same leading dimensions).

    Returns:
        `p_gen`, float32, `(batch, [T,] 1)`.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn import PointerGenerator, pointer_generator_distribution
        >>> rng = np.random.default_rng(0)
        >>> context = rng.random((2, 16), dtype="float32")
        >>> decoder_state = rng.random((2, 32), dtype="float32")
        >>> decoder_input = rng.random((2, 8), dtype="float32")
        >>> p_gen = PointerGenerator()([context, decoder_state, decoder_input])
        >>> tuple(p_gen.shape)
        (2, 1)
        >>> vocab_probs = np.full((2, 10), 0.1, "float32")  # 10 words
        >>> attention = np.full((2, 4), 0.25, "float32")  # over 4 source words
        >>> source_ids = np.array([[3, 10, 10, 5], [11, 2, 10, 7]])  # 10, 11: OOVs
        >>> probs = pointer_generator_distribution(
        ...     p_gen, vocab_probs, attention, source_ids, num_oov=2)
        >>> tuple(probs.shape)
        (2, 12)
        >>> ops.convert_to_numpy(ops.sum(probs, axis=-1)).round(5).tolist()
        [1.0, 1.0]
    """

    _INPUT_NAMES = ("context", "state", "decoder_input")

    def __init__(
        self,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def _validate_shapes(self, input_shape):
        name = self.__class__.__name__
        if (
            not isinstance(input_shape, (list, tuple))
            or len(input_shape) != 3
            or not all(isinstance(s, (list, tuple)) for s in input_shape)
        ):
            raise ValueError(
                f"{name} must be called on a list [context, state, "
                f"decoder_input]. Received input shapes: {input_shape}"
            )
        ranks = {len(s) for s in input_shape}
        if len(ranks) != 1 or ranks.pop() not in (2, 3):
            raise ValueError(
                f"{name}: context, state and decoder_input must all have rank "
                "2 (batch, dim) or all rank 3 (batch, T, dim). Received "
                f"shapes: {[tuple(s) for s in input_shape]}"
            )
        for label, shape in zip(self._INPUT_NAMES, input_shape, strict=True):
            if shape[-1] is None:
                raise ValueError(
                    f"{name}: the last dimension of {label} must be known. "
                    f"Received {label} shape: {tuple(shape)}"
                )
        return [tuple(s) for s in input_shape]

    def build(self, input_shape):
        shapes = self._validate_shapes(input_shape)
        self.kernels = [
            self.add_weight(
                name=f"{label}_kernel",
                shape=(int(shape[-1]), 1),
                initializer=self.kernel_initializer,
                autocast=False,
            )
            for label, shape in zip(self._INPUT_NAMES, shapes, strict=True)
        ]
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias",
                shape=(1,),
                initializer=self.bias_initializer,
                autocast=False,
            )
        self.built = True

    def call(self, inputs):
        self._validate_shapes([tuple(x.shape) for x in inputs])
        logits = None
        for x, kernel in zip(inputs, self.kernels, strict=True):
            term = ops.matmul(ops.cast(x, "float32"), ops.cast(kernel, "float32"))
            logits = term if logits is None else logits + term
        if self.bias is not None:
            logits = logits + ops.cast(self.bias, "float32")
        return ops.sigmoid(logits)

    def compute_mask(self, inputs, mask=None):
        if isinstance(mask, (list, tuple)):
            return mask[0]
        return mask

    def compute_output_shape(self, input_shape):
        shapes = self._validate_shapes(input_shape)
        return (*shapes[0][:-1], 1)

    def compute_output_spec(self, inputs):
        shape = self.compute_output_shape([tuple(x.shape) for x in inputs])
        return keras.KerasTensor(shape, dtype="float32")

    def get_config(self):
        return {
            **super().get_config(),
            "use_bias": self.use_bias,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }
