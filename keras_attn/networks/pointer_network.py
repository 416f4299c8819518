"""Pointer Networks (Vinyals, Fortunato & Jaitly 2015): attention as the output.

A sequence-to-sequence model whose output dictionary is its input: at every
decoder step the attention distribution over the input positions *is* the
output distribution, so the number of choices changes with each example.

    e_1..e_n = LSTM_enc(x_1..x_n)
    d_t = LSTM_dec(x_{y_{t-1}}, d_{t-1})            (d_0 = the encoder's state)
    u^t_j = score(d_t, e_j),  p(y_t = j | y_<t, x) = softmax_j(u^t_j)

with `score` any keras_attn score layer (`BahdanauAttention` by default:
`v^T tanh(W1 e_j + W2 d_t)`, the paper's eq. 3).

Positions. The memory the decoder points into is `[e_end; e_1..e_n]`: a
learned END vector is prepended as position 0, so "end of the output" is
pointing at position 0 and input element `x_j` is position `j` (1-based).
The decoder's input table is `[start; x_1..x_n]` the same way: the element
chosen last (position `j` gives `x_j`), and a learned start vector for
position 0, which is the first step's input. So a decoder's start id and end
id are both 0.

* `PointerNetwork`: the layer; `call` is teacher-forced training,
  `initial_state` and `step` decode one step at a time (the `step(ids, state)`
  the library's search functions take).
* `pointer_network_log_probs`: the output of one score layer over a prepared
  memory, a masked log-softmax.
* `pointer_network_nll`: the training loss over padded target sequences.
* `PointerNetwork.decode`: greedy or beam search through `keras_attn.search.strategies`;
  with `permutation=True` only permutations of the input are searched
  (`NoRepeatNgram(1)` and `EndAfterAll`).
"""

import keras
from keras import ops

from keras_attn.arguments import deserialize_layer
from keras_attn.layers.additive import BahdanauAttention
from keras_attn.layers.base import AttentionMemory, BaseAttention
from keras_attn.layers.masking import check_mask, keras_mask, softmax_dtype
from keras_attn.search.processors import LogitsProcessor, NoRepeatNgram
from keras_attn.search.strategies import beam_search, greedy_search, tile_batch
from keras_attn.training.loss_reduction import check_reduction, reduce_masked

END = 0
_NEG_INF = float("-inf")


def pointer_network_log_probs(attention, query, memory, mask=None):
    """Log-distribution over memory positions: a masked log-softmax of scores.

    Unlike `BaseAttention.step`, this never takes the log of a softmax (exact
    for tiny probabilities) and masked positions get `-inf`, not 0.

    Args:
        attention: A built `BaseAttention` score layer.
        query: `(batch, Tq, query_dim)`, or `(batch, query_dim)` for one step.
        memory: An `AttentionMemory` from `attention.prepare_memory`; its mask
            `(batch, Tv)` marks the positions that may be pointed at.
        mask: Optional extra boolean mask, broadcastable to the output (the
            positions already chosen, say); True = allowed.

    Returns:
        Log-probabilities `(batch, Tq, Tv)` (`(batch, Tv)` for a rank-2
        query), float32 (float64 for a float64 layer), `-inf` where masked.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn import DotAttention, pointer_network_log_probs
        >>> layer = DotAttention()
        >>> layer.build([(1, 2), (1, 3, 2)])
        >>> points = np.ones((1, 3, 2), "float32")
        >>> points_mask = np.array([[True, True, False]])
        >>> memory = layer.prepare_memory(points, value_mask=points_mask)
        >>> query = np.ones((1, 2), "float32")
        >>> log_probs = pointer_network_log_probs(layer, query, memory)
        >>> np.exp(ops.convert_to_numpy(log_probs), dtype="float64").round(4).tolist()
        [[0.5, 0.5, 0.0]]
    """
    query = ops.convert_to_tensor(query)
    single_step = len(query.shape) == 2
    scores = attention.scores(query, memory)
    if single_step:
        scores = ops.expand_dims(scores, 1)
    scores = ops.cast(scores, softmax_dtype(scores.dtype))
    allowed = ops.expand_dims(ops.cast(memory.mask, "bool"), 1)
    if mask is not None:
        if single_step:
            mask = ops.expand_dims(mask, 1)
        allowed = ops.logical_and(allowed, ops.cast(mask, "bool"))
    log_probs = ops.log_softmax(ops.where(allowed, scores, _NEG_INF), axis=-1)
    return ops.squeeze(log_probs, 1) if single_step else log_probs


def pointer_network_nll(log_probs, targets, reduction="mean"):
    """Negative log-likelihood of target positions, ignoring padding.

    Args:
        log_probs: `(batch, T, n + 1)` from `PointerNetwork`.
        targets: int `(batch, T)` positions in `[0, n]`, each sequence ending
            with `END` (0) and padded with -1 after it.
        reduction: `"mean"` (over the real target steps), `"sum"` or
            `"none"` (`(batch, T)`, 0 at padding).

    Returns:
        The loss, float32.

    Examples:
        >>> import numpy as np
        >>> from keras_attn import pointer_network_nll
        >>> log_probs = np.log(np.full((1, 3, 3), 1 / 3, "float32"))  # (batch, T, n+1)
        >>> targets = np.array([[2, 0, -1]], "int32")  # point at 2, then END, padding
        >>> round(float(pointer_network_nll(log_probs, targets)), 4)  # log(3)
        1.0986
    """
    check_reduction(reduction)
    targets = ops.cast(targets, "int32")
    valid = ops.greater_equal(targets, 0)
    # Padding reads the END column (never masked, so finite), then drops out.
    picked = ops.take_along_axis(
        ops.cast(log_probs, "float32"),
        ops.expand_dims(ops.maximum(targets, 0), -1),
        axis=-1,
    )
    return reduce_masked(-ops.squeeze(picked, -1), valid, reduction)


class EndAfterAll(LogitsProcessor):
    """Bans END (position 0) until every real input position was chosen.

    With `NoRepeatNgram(1)` (no position twice), a hypothesis can only end
    after a full permutation of its row's input: a valid tour for TSP.

    Args:
        counts: int `(N,)`, the real (unpadded) input positions of each
            search row (tile them with `tile_batch` for a beam).
    """

    def __init__(self, counts):
        self.counts = ops.cast(counts, "int32")

    def __call__(self, log_probs, history, step):
        is_end = ops.arange(ops.shape(log_probs)[1]) == END
        early = step < self.counts
        return self.ban(log_probs, ops.logical_and(is_end[None], early[:, None]))


@keras.saving.register_keras_serializable(package="keras_attn")
class PointerNetwork(keras.layers.Layer):
    """A Pointer Network: an LSTM encoder and an LSTM decoder that points.

    Position 0 of the output is END (a learned vector prepended to the
    encoder outputs); position `j >= 1` is input element `j` (the
    `keras_attn.networks.pointer_network` module docstring). The decoder starts from
    the encoder's final `[h, c]`; its input is the element chosen at the
    previous step (a learned start vector at step 0).

    Args:
        units: Width of both LSTMs (the paper: 256 or 512).
        attention: The score layer (a `BaseAttention`, or its config); its
            query and keys are both `units` wide. Defaults to
            `BahdanauAttention(units)`.
        mask_chosen: If True, a position chosen once cannot be chosen again
            (permutations: TSP). END is never masked this way.
        **kwargs: Base `Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `[points, targets]`:

            - `points`: `(batch, n, input_dim)` input elements.
            - `targets`: int `(batch, T)` positions in `[0, n]` ending with
              `END` (0), -1 after it (teacher forcing: step `t` reads the
              element at `targets[:, t - 1]`).
        mask: Masks propagated by Keras, `[points_mask, targets_mask]`.
        points_mask: Optional boolean `(batch, n)`, False at padding
            (overrides the propagated mask). Padding is never pointed at.

    Returns:
        Log-probabilities `(batch, T, n + 1)`, float32 (float64 for a float64
        layer), `-inf` at masked positions.

    Examples:
        >>> import numpy as np
        >>> from keras_attn import PointerNetwork, pointer_network_nll
        >>> rng = np.random.default_rng(0)
        >>> points = rng.random((2, 5, 2), dtype="float32")
        >>> mask = np.array([[True] * 5, [True] * 4 + [False]])
        >>> targets = np.array([[2, 1, 3, 5, 4, 0], [4, 1, 2, 3, 0, -1]])  # END = 0
        >>> layer = PointerNetwork(units=32, mask_chosen=True)
        >>> log_probs = layer([points, targets], points_mask=mask)
        >>> tuple(log_probs.shape)
        (2, 6, 6)
        >>> loss = pointer_network_nll(log_probs, targets)
        >>> state = layer.initial_state(points, mask)
        >>> ids = np.zeros((2,), "int32")  # the start token: position 0
        >>> step_log_probs, state = layer.step(ids, state)
        >>> tuple(step_log_probs.shape)
        (2, 6)
    """

    def __init__(self, units, attention=None, mask_chosen=False, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(units, int) or units <= 0:
            raise ValueError(
                f"`units` must be a positive integer. Received: units={units}"
            )
        attention = deserialize_layer(attention)
        if attention is None:
            attention = BahdanauAttention(units, dtype=self.dtype_policy)
        if not isinstance(attention, BaseAttention):
            raise ValueError(
                "`attention` must be a keras_attn score layer (a "
                f"BaseAttention). Received: attention={attention!r}"
            )
        self.units = units
        self.attention = attention
        self.mask_chosen = mask_chosen
        self.encoder = keras.layers.LSTM(
            units,
            return_sequences=True,
            return_state=True,
            dtype=self.dtype_policy,
            name="encoder",
        )
        self.decoder = keras.layers.LSTM(
            units, return_sequences=True, dtype=self.dtype_policy, name="decoder"
        )
        self.supports_masking = True

    # ----------------------------------------------------------- build

    def _validate_shapes(self, input_shape):
        name = self.__class__.__name__
        if (
            not isinstance(input_shape, (list, tuple))
            or len(input_shape) != 2
            or not all(isinstance(s, (list, tuple)) for s in input_shape)
        ):
            raise ValueError(
                f"{name} must be called on a list [points, targets]. "
                f"Received input shapes: {input_shape}"
            )
        points_shape, targets_shape = (tuple(s) for s in input_shape)
        if len(points_shape) != 3 or points_shape[-1] is None:
            raise ValueError(
                f"{name}: points must have shape (batch, n, input_dim) with a "
                f"known input_dim. Received points shape: {points_shape}"
            )
        if len(targets_shape) != 2:
            raise ValueError(
                f"{name}: targets must have shape (batch, T). Received "
                f"targets shape: {targets_shape}"
            )
        return points_shape, targets_shape

    def build(self, input_shape):
        points_shape, _ = self._validate_shapes(input_shape)
        input_dim = int(points_shape[-1])
        memory_shape = (None, None, self.units)
        for layer, shape in (
            (self.encoder, (None, None, input_dim)),
            (self.decoder, (None, None, input_dim)),
            # A deserialized score layer comes back built.
            (self.attention, [memory_shape, memory_shape]),
        ):
            if not layer.built:
                layer.build(shape)
        # Uniform in [-0.08, 0.08], the paper's initialization.
        init = keras.initializers.RandomUniform(-0.08, 0.08)
        self.start_vector = self.add_weight(
            name="start_vector", shape=(input_dim,), initializer=init
        )
        self.end_vector = self.add_weight(
            name="end_vector", shape=(self.units,), initializer=init
        )
        self.built = True

    # ----------------------------------------------------------- encoding

    def _encode(self, points, points_mask):
        """The memory, the decoder's input table and the encoder's state."""
        check_mask(points_mask, "points_mask", points, "n")
        batch = ops.shape(points)[0]
        if points_mask is None:
            points_mask = ops.ones(ops.shape(points)[:2], dtype="bool")
        points_mask = ops.cast(points_mask, "bool")
        outputs, h, c = self.encoder(points, mask=points_mask)

        def prepend(vector, sequence):
            first = ops.broadcast_to(
                ops.cast(vector, sequence.dtype), (batch, 1, vector.shape[0])
            )
            return ops.concatenate([first, sequence], axis=1)

        values = prepend(self.end_vector, outputs)
        memory_mask = ops.concatenate(
            [ops.ones((batch, 1), dtype="bool"), points_mask], axis=1
        )
        memory = self.attention.prepare_memory(values, value_mask=memory_mask)
        table = prepend(self.start_vector, ops.cast(points, self.compute_dtype))
        return memory, table, [h, c]

    @staticmethod
    def _one_hot(ids, depth, dtype):
        # A comparison, not `ops.one_hot`: tf2onnx converts only TensorFlow's
        # OneHot of rank-1 ids, and these are `(B, T)`.
        ids = ops.maximum(ops.cast(ids, "int32"), 0)
        return ops.cast(ids[..., None] == ops.arange(depth, dtype="int32"), dtype)

    # ----------------------------------------------------------- training

    def call(self, inputs, mask=None, points_mask=None, training=None):
        self._validate_shapes([tuple(x.shape) for x in inputs])
        points, targets = inputs
        if points_mask is None and mask is not None:
            points_mask = mask[0]
        if points_mask is None:
            points_mask = keras_mask(points)
        memory, table, state = self._encode(points, points_mask)
        depth = ops.shape(table)[1]
        targets = ops.cast(targets, "int32")
        batch = ops.shape(targets)[0]
        previous = ops.concatenate(
            [ops.zeros((batch, 1), dtype="int32"), targets[:, :-1]], axis=1
        )
        # A one-hot product rather than a batched gather: one matmul on every
        # backend, and n + 1 is small.
        decoder_inputs = ops.matmul(self._one_hot(previous, depth, table.dtype), table)
        queries = self.decoder(decoder_inputs, initial_state=state, training=training)
        chosen_mask = None
        if self.mask_chosen:
            chosen = ops.cumsum(self._one_hot(previous, depth, "int32"), axis=1)
            chosen_mask = ops.logical_not(self._without_end(chosen > 0))
        return pointer_network_log_probs(self.attention, queries, memory, chosen_mask)

    @staticmethod
    def _without_end(chosen):
        """`chosen` with the END column (position 0) set to False."""
        keep = ops.arange(ops.shape(chosen)[-1]) > 0
        return ops.logical_and(chosen, keep)

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        points_shape, targets_shape = self._validate_shapes(input_shape)
        n = points_shape[1]
        return (*targets_shape, None if n is None else n + 1)

    def compute_output_spec(self, inputs, **kwargs):
        shape = self.compute_output_shape([tuple(x.shape) for x in inputs])
        return keras.KerasTensor(shape, dtype=softmax_dtype(self.compute_dtype))

    # ----------------------------------------------------------- decoding

    def initial_state(self, points, points_mask=None):
        """The decoding state before the first step.

        Args:
            points: `(batch, n, input_dim)`.
            points_mask: Optional boolean `(batch, n)`, False at padding.

        Returns:
            A dict of tensors, each with the batch as its first axis (so a
            beam search can tile and reorder it): the decoder's `h` and `c`,
            the projected memory `keys`, its `values` and `mask`
            `(batch, n + 1)`, the input `table` `(batch, n + 1, input_dim)`
            and, with `mask_chosen`, `chosen` `(batch, n + 1)`.
        """
        if not self.built:
            self.build([tuple(points.shape), (None, None)])
        if points_mask is None:
            points_mask = keras_mask(points)
        memory, table, (h, c) = self._encode(points, points_mask)
        state = {
            "h": h,
            "c": c,
            "keys": memory.keys,
            "values": memory.values,
            "mask": memory.mask,
            "table": table,
        }
        if self.mask_chosen:
            state["chosen"] = ops.zeros_like(memory.mask)
        return state

    def step(self, ids, state, training=None):
        """One decoding step: read the element chosen last, point at the next.

        Args:
            ids: int `(batch,)`: the position chosen at the previous step
                (`END`, 0, before the first step: it reads the start vector).
            state: From `initial_state` or the previous `step`.

        Returns:
            `(log_probs, state)`: `(batch, n + 1)` float32 log-probabilities
            (`-inf` at padding and, with `mask_chosen`, at chosen positions),
            and the new state.
        """
        table = state["table"]
        one_hot = self._one_hot(ids, ops.shape(table)[1], table.dtype)
        x = ops.einsum("bn,bnd->bd", one_hot, table)
        h, (h, c) = self.decoder.cell(x, [state["h"], state["c"]], training=training)
        state = {**state, "h": h, "c": c}
        chosen_mask = None
        if self.mask_chosen:
            picked = self._without_end(ops.cast(one_hot, "bool"))
            state["chosen"] = ops.logical_or(state["chosen"], picked)
            chosen_mask = ops.logical_not(state["chosen"])
        memory = AttentionMemory(state["keys"], state["values"], state["mask"])
        return pointer_network_log_probs(self.attention, h, memory, chosen_mask), state

    def decode(
        self,
        points,
        points_mask=None,
        beam_size=1,
        permutation=None,
        length_penalty=0.0,
        max_length=None,
        processors=(),
    ):
        """Greedy (`beam_size=1`) or beam search over the output positions.

        Args:
            points: `(batch, n, input_dim)`.
            points_mask: Optional boolean `(batch, n)`, False at padding.
            beam_size: Python int; 1 decodes greedily.
            permutation: If True, only permutations of each row's real
                points, then END: `NoRepeatNgram(1)` and `EndAfterAll` in
                the search. Defaults to `mask_chosen`.
            length_penalty: GNMT's alpha for the beam (0: raw sum).
            max_length: Python int, the most steps (END included). Defaults
                to `n + 1`, enough for any sequence without repeats.
            processors: More processors (`keras_attn.search.processors`), applied
                after the permutation constraint.

        Returns:
            A `keras_attn.search.DecodingResult`: `ids` `(batch,
            max_length)` are positions (1-based, END = 0 after the last one),
            `lengths` the positions before END.
        """
        if permutation is None:
            permutation = self.mask_chosen
        if max_length is None:
            max_length = int(points.shape[1]) + 1
        batch = ops.shape(points)[0]
        constraints = []
        if permutation:
            if points_mask is None:
                counts = ops.full((batch,), ops.shape(points)[1], "int32")
            else:
                counts = ops.sum(ops.cast(points_mask, "int32"), axis=1)
            counts = tile_batch(counts, beam_size)
            constraints = [NoRepeatNgram(1), EndAfterAll(counts)]
        constraints += list(processors)
        state = self.initial_state(points, points_mask)
        start_ids = ops.full((batch,), END, "int32")
        if beam_size == 1:
            return greedy_search(
                self.step, state, start_ids, END, max_length, processors=constraints
            )
        return beam_search(
            self.step,
            state,
            start_ids,
            END,
            max_length,
            beam_size,
            length_penalty=length_penalty,
            processors=constraints,
        )

    # ----------------------------------------------------------- config

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "attention": keras.saving.serialize_keras_object(self.attention),
            "mask_chosen": self.mask_chosen,
        }
