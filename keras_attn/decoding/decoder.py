"""An attentional decoder composed once: teacher-forced logits in `fit`, and
`generate` with any search.

The decoder builds the one-token step (embed, run the attention cell,
project) and hands it to the model-free searches of `keras_attn.search`;
`generate` runs the search compiled (`keras_attn.decoding.compiled`).
"""

from typing import Any, NamedTuple

import keras
from keras import ops

from keras_attn.arguments import deserialize_layer
from keras_attn.copy.coverage import coverage_loss
from keras_attn.copy.distributions import (
    pointer_generator_distribution,
    pointer_generator_log_distribution,
)
from keras_attn.decoding.compiled import CompiledFunction
from keras_attn.decoding.copying import (
    attended_memory,
    check_copy_arguments,
    check_copy_gate_state,
    check_source_ids,
    copy_layer,
    memory_values,
    oov_slots,
    read_alignments,
)
from keras_attn.decoding.strategy_options import search_options
from keras_attn.layers.masking import keras_mask
from keras_attn.recurrent.memory_states import split_memory_states
from keras_attn.recurrent.rnn import AttentionRNN
from keras_attn.recurrent.wrapper import AttentionCellWrapper
from keras_attn.search.checks import check_ids_in_vocabulary, check_stop_ids
from keras_attn.search.loop import tile_batch


class DecoderOutputs(NamedTuple):
    """What the decoder gives its output head, at one step or all of them.

    Attributes:
        hidden: The output layer's inputs, `(batch, [T,] d)`: the cell's
            outputs.
        attention: float32 `(batch, [T,] Tv)`, the attention weights; None
            when the cell returns no alignments.
        copy_gate: `p_gen`, `(batch, [T,] 1)`; None without copy.

    Example:
        >>> import keras
        >>> import numpy as np
        >>> import keras_attn as ka
        >>> decoder = ka.AttentionDecoder(
        ...     keras.layers.Embedding(10, 8),
        ...     ka.LuongAttentionCell(keras.layers.GRUCell(16),
        ...         ka.DotAttention(), input_feeding=False),
        ...     keras.layers.Dense(10), copy=True, num_oov=5, unk_id=3)
        >>> memory = np.random.rand(2, 5, 16).astype("float32")
        >>> target_in = np.array([[1, 4, 12], [1, 6, 0]], "int32")
        >>> outputs = decoder.teacher_forced_outputs(target_in, memory)
        >>> tuple(outputs.hidden.shape), tuple(outputs.attention.shape)
        ((2, 3, 16), (2, 3, 5))
        >>> tuple(outputs.copy_gate.shape)
        (2, 3, 1)
    """

    hidden: Any
    attention: Any = None
    copy_gate: Any = None


def teaches_in_parallel(cell):
    """Whether a decoder may teacher-force `cell` in parallel: a Luong cell
    without input feeding, whose attention reads each step's state alone
    (a coverage attention, given all the steps' states, carries its
    coverage through them itself)."""
    return cell.style == "luong" and not cell.input_feeding


def static_shape(x):
    """`x`'s shape with None for every size not a Python int (JAX's shape
    inference gives symbolic ones, which a build must not record)."""
    return tuple(d if isinstance(d, int) else None for d in x.shape)


@keras.saving.register_keras_serializable(package="keras_attn")
class AttentionDecoder(keras.layers.Layer):
    """A decoder from a target embedding, an attention cell and an output layer.

    Composed once, it gives the teacher-forced logits of a target sequence
    (its `call`, inside `fit`) and generates sequences from an encoder's
    memory (`generate`) with greedy, beam or sampling search and every
    processor, as TensorFlow Addons' `BasicDecoder` and `BeamSearchDecoder`
    took the cell and the output layer. The searches stay model-free: the
    decoder gives them its `step`.

    Args:
        embedding: A Keras layer from int ids `(batch, ...)` to vectors
            `(batch, ..., d)`: the target embedding.
        cell: An `AttentionCellWrapper` of style `"bahdanau"` or `"luong"`,
            or an `AttentionRNN` that runs one.
        output_layer: A Keras layer from the cell's outputs to the vocabulary's
            logits, `(..., V)` (a `Dense(V)`).
        copy: A `PointerGenerator`, True (a new one) or None (no copy):
            with one, the decoder copies source words (See et al. 2017's
            pointer-generator) over the extended vocabulary, its `V` words
            and `num_oov` slots for the source's out-of-vocabulary words
            (ids `V + k`). The cell's `return_alignments` is turned on.
        num_oov: Python int, with copy: the number of OOV slots; None
            (default): the source's length, which must then be static.
        unk_id: int, with copy: the id the target embedding reads for an
            extended id (a copied word fed back), in `[0, V)`.
        copy_gate_state: With copy, the state the gate `p_gen` reads beside
            the context and the input: `"output"` (default), the cell's
            output (`h~_t` for a Luong cell, OpenNMT's choice; `s_t` for
            a Bahdanau cell), or `"cell"`, the wrapped cell's own output
            `s_t` (See et al. 2017's decoder state), for a Luong cell
            without input feeding.
        coverage_loss_weight: float >= 0, with a cell over a
            `CoverageAttention` (whose states carry the coverage): the
            weight of See et al.'s coverage loss, `sum_i min(a^t_i, c^t_i)`
            averaged over the target steps (those the target embedding's
            mask keeps), which `call` adds to the model's losses (`add_loss`);
            0 adds none. The cell's `return_alignments` is turned on.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        target_ids: int `(batch, T)`: the decoder's inputs (the targets
            shifted right, the start id first).
        memory: `(batch, Tv, memory_dim)`, the encoder's outputs.
        memory_mask: Optional bool `(batch, Tv)`, False at padding.
        initial_state: Optional initial state(s) of the wrapped cell (the
            encoder's final states).
        training: Passed to the layers.
        source_ids: int `(batch, Tv)`, the source in the extended
            vocabulary; required with copy.

    Returns:
        The logits `(batch, T, V)`; with copy, the probabilities over the
        extended vocabulary, float32 `(batch, T, V + num_oov)`, to train
        with `keras.losses.SparseCategoricalCrossentropy()` (from
        probabilities): `-log P(target)`, `pointer_generator_nll` of the
        decoder's parts.

    Examples:
        >>> import keras
        >>> import numpy as np
        >>> import keras_attn as ka
        >>> decoder = ka.AttentionDecoder(
        ...     keras.layers.Embedding(10, 8),
        ...     ka.AttentionCellWrapper(keras.layers.GRUCell(16),
        ...         ka.BahdanauAttention(16), style="bahdanau"),
        ...     keras.layers.Dense(10))
        >>> memory = np.random.rand(2, 5, 16).astype("float32")
        >>> h = np.zeros((2, 16), "float32")
        >>> target_in = np.array([[1, 4, 5], [1, 6, 0]], "int32")
        >>> tuple(decoder(target_in, memory, initial_state=[h]).shape)
        (2, 3, 10)
        >>> result = decoder.generate(memory, initial_state=[h], start_id=1,
        ...     end_id=2, max_length=6, strategy="beam", beam_size=3)
        >>> tuple(result.ids.shape)
        (2, 6)
    """

    def __init__(
        self,
        embedding,
        cell,
        output_layer,
        copy=None,
        num_oov=None,
        unk_id=None,
        copy_gate_state="output",
        coverage_loss_weight=1.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        cell = deserialize_layer(cell)
        rnn = cell if isinstance(cell, AttentionRNN) else None
        if rnn is None and isinstance(cell, AttentionCellWrapper):
            rnn = AttentionRNN(cell)
        if rnn is None or rnn.cell.style == "self":
            raise ValueError(
                "`cell` must be an AttentionCellWrapper attending over a memory "
                "(style 'bahdanau' or 'luong') or an AttentionRNN of one. "
                f"Received: cell={cell!r}"
            )
        self.embedding = deserialize_layer(embedding)
        self.rnn = rnn
        self.output_layer = deserialize_layer(output_layer)
        self.copy = copy_layer(copy)
        self.num_oov = num_oov
        self.unk_id = unk_id
        self.vocab_size = None
        if self.copy is not None:
            self.vocab_size = check_copy_arguments(
                self.output_layer, rnn.cell, num_oov, unk_id
            )
        self.copy_gate_state = check_copy_gate_state(copy_gate_state, rnn.cell)
        if not isinstance(coverage_loss_weight, (int, float)) or not (
            coverage_loss_weight >= 0
        ):
            raise ValueError(
                "`coverage_loss_weight` must be a number >= 0. Received: "
                f"coverage_loss_weight={coverage_loss_weight!r}"
            )
        self.coverage_loss_weight = float(coverage_loss_weight)
        if rnn.cell.carries_coverage and self.coverage_loss_weight:
            read_alignments(rnn.cell, "an AttentionDecoder with a coverage loss")
        self.seed_generator = keras.random.SeedGenerator()
        self._compiled = CompiledFunction(self, self._generate_function)
        if teaches_in_parallel(rnn.cell):
            # The cell's own recurrence over the whole target, for `call`;
            # after `rnn` in the attributes, so saved files keep their paths.
            self.teacher_rnn = keras.layers.RNN(
                rnn.cell.cell, return_sequences=True, dtype=self.dtype_policy
            )

    def __call__(self, target_ids, memory, *args, **kwargs):
        # Keras fills `memory_mask` from `memory`'s mask by keyword when it
        # is None, which collides with a None given by position: the
        # arguments after `memory` go by keyword.
        names = ("memory_mask", "initial_state", "training", "source_ids")
        if len(args) > len(names):
            raise TypeError(
                f"AttentionDecoder takes at most {2 + len(names)} positional "
                f"arguments. Received: {2 + len(args)}"
            )
        kwargs.update(zip(names[: len(args)], args, strict=True))
        return super().__call__(target_ids, memory, **kwargs)

    @property
    def cell(self):
        """The `AttentionCellWrapper` that runs each step."""
        return self.rnn.cell

    def call(
        self,
        target_ids,
        memory,
        memory_mask=None,
        initial_state=None,
        training=None,
        source_ids=None,
    ):
        if self.copy is not None:
            source_ids = check_source_ids(source_ids, memory)
        outputs = self.teacher_forced_outputs(
            target_ids, memory, memory_mask, initial_state, training
        )
        logits = self.output_layer(outputs.hidden, training=training)
        if self.copy is None:
            return logits
        return pointer_generator_distribution(
            outputs.copy_gate,
            logits,
            outputs.attention,
            source_ids,
            num_oov=oov_slots(self.num_oov, source_ids),
            from_logits=True,
        )

    def teacher_forced_outputs(
        self, target_ids, memory, memory_mask=None, initial_state=None, training=None
    ):
        """`call` before the output layer: a `DecoderOutputs` of all steps,
        for a model whose output head is its own (a sampled softmax, a
        shortlist). Adds the coverage loss as `call` does.

        Args:
            target_ids, memory, memory_mask, initial_state, training: As
                `call` takes them.
        """
        # A model may use the decoder through this method alone, never
        # `__call__`, which marks a layer built once its weights exist.
        self.built = True
        if self.copy is not None:
            target_ids = self.in_vocabulary(target_ids)
        embedded = self.embedding(target_ids, training=training)
        cell_output = context = None
        if teaches_in_parallel(self.cell):
            cell_output, context, attention = self.attend_after_cell(
                embedded, memory, memory_mask, initial_state, training
            )
            hidden = cell_output
            if self.cell.output_attention:
                hidden = self.cell.attentional_state(context, cell_output)
        else:
            hidden = self.rnn(
                [embedded, memory],
                initial_state=initial_state,
                memory_mask=memory_mask,
                training=training,
            )
            attention = None
            if self.cell.return_alignments:
                hidden, attention = hidden
        if self.cell.carries_coverage and self.coverage_loss_weight:
            self.add_coverage_loss(attention, keras_mask(embedded))
        if self.copy is None:
            return DecoderOutputs(hidden, attention)
        if context is None:
            context = attended_memory(attention, ops.cast(memory, hidden.dtype))
        gate = self.copy_gate(context, hidden, cell_output, embedded)
        return DecoderOutputs(hidden, attention, gate)

    def copy_gate(self, context, output, cell_output, embedded):
        """`p_gen` from the context, the state `copy_gate_state` names (the
        cell's `output` or the wrapped cell's `cell_output`) and the
        embedded input, at one step or all."""
        state = cell_output if self.copy_gate_state == "cell" else output
        return self.copy([ops.cast(context, output.dtype), state, embedded])

    def attend_after_cell(self, embedded, memory, memory_mask, initial_state, training):
        """`(cell_outputs, contexts, alignments)` of all steps, for a cell
        whose attention never enters its recurrence (`teaches_in_parallel`):
        the wrapped cell over the whole target first, then the attention
        over all its steps at once, as the cell's steps would give them one
        by one."""
        cell = self.cell
        if not self.rnn.built:  # the cell's weights, from the memory's width
            self.rnn.build([static_shape(embedded), static_shape(memory)])
        # Keras fills no mask in a call with `initial_state`: pass the
        # target's (masked steps keep the state, as in `AttentionRNN`).
        states = self.teacher_rnn(
            embedded,
            initial_state=initial_state,
            mask=keras_mask(embedded),
            training=training,
        )
        if memory_mask is None:
            memory_mask = keras_mask(memory)
        context, attention = cell.attention(
            [states, ops.cast(memory, states.dtype)],
            value_mask=memory_mask,
            return_attention_scores=True,
            training=training,
        )
        return states, context, attention

    def add_coverage_loss(self, attention, target_mask):
        """Adds `coverage_loss_weight` times the coverage loss of the
        teacher-forced alignments `(batch, T, Tv)`: the coverage of step `t`
        is the sum of the weights before it, as the cell carried it."""
        coverage = ops.cumsum(attention, axis=1) - attention
        loss = coverage_loss(attention, coverage, mask=target_mask)
        self.add_loss(self.coverage_loss_weight * loss)

    def in_vocabulary(self, ids):
        """`ids` with the extended ones (`>= V`, copied words) as `unk_id`:
        what the target embedding reads when the decoder copies."""
        ids = ops.cast(ids, "int32")
        return ops.where(ops.less(ids, self.vocab_size), ids, self.unk_id)

    def initial_search_state(
        self, memory, memory_mask=None, initial_state=None, source_ids=None
    ):
        """The step's states before the first token: the cell's, with the
        memory projected once (`get_initial_state_with_memory`); with copy,
        the dict `{"cell": those, "source_ids": source_ids}` (the search
        reorders the source's ids with the rows)."""
        states = self.cell.get_initial_state_with_memory(
            memory, memory_mask, initial_state
        )
        if self.copy is None:
            return states
        return {"cell": states, "source_ids": check_source_ids(source_ids, memory)}

    def step(self, ids, states):
        """One token: `(logits, states)`, or `(logits, states, attention)`
        when the cell returns its alignments (the search's `extras`).

        Args:
            ids: int32 `(N,)`, the previous token of each row.
            states: `initial_search_state`'s, or the previous step's.

        With copy, the scores are the log-probabilities over the extended
        vocabulary (`pointer_generator_log_distribution`), `(N, V +
        num_oov)`, and the ids may be extended ones (embedded as `unk_id`).
        """
        if self.copy is not None:
            return self.copy_step(ids, states)
        outputs, states = self.step_outputs(ids, states)
        logits = self.output_layer(outputs.hidden)
        if outputs.attention is None:
            return logits, states
        return logits, states, outputs.attention

    def step_outputs(self, ids, cell_states):
        """One token before the output layer: `(DecoderOutputs, states)`,
        for a model whose output head is its own.

        Args:
            ids: int32 `(N,)`, the previous token of each row (extended ids
                allowed with copy).
            cell_states: The cell's states (`initial_search_state`'s
                without copy, its `"cell"` entry with copy).
        """
        if self.copy is not None:
            ids = self.in_vocabulary(ids)
        embedded = self.embedding(ids)
        output, cell_states = self.cell(embedded, cell_states)
        if not self.cell.return_alignments:
            return DecoderOutputs(output), cell_states
        output, attention = self.cell.split_output(output)
        if self.copy is None:
            return DecoderOutputs(output, attention), cell_states
        values = memory_values(self.cell, cell_states, ops.shape(attention)[1])
        context = attended_memory(attention, values)
        # The wrapped cell's output is its first state (Keras' LSTM, GRU
        # and SimpleRNN cells), the cell's states' second.
        gate = self.copy_gate(context, output, cell_states[1], embedded)
        return DecoderOutputs(output, attention, gate), cell_states

    def copy_step(self, ids, states):
        """`step` of a copying decoder: `(log_probs, states, attention)`."""
        source_ids = states["source_ids"]
        outputs, cell_states = self.step_outputs(ids, states["cell"])
        log_probs = pointer_generator_log_distribution(
            outputs.copy_gate,
            self.output_layer(outputs.hidden),
            outputs.attention,
            source_ids,
            num_oov=oov_slots(self.num_oov, source_ids),
        )
        return (
            log_probs,
            {"cell": cell_states, "source_ids": source_ids},
            outputs.attention,
        )

    def search(
        self,
        memory,
        memory_mask=None,
        initial_state=None,
        *,
        start_id,
        end_id,
        max_length,
        strategy="greedy",
        source_ids=None,
        **options,
    ):
        """`generate`'s search, uncompiled: for a caller that compiles it
        itself (a `tf.function`, an exported endpoint)."""
        search, options = search_options(strategy, options)
        if strategy == "sampling" and options.get("seed") is None:
            options["seed"] = self.seed_generator
        states = self.initial_search_state(
            memory, memory_mask, initial_state, source_ids
        )
        step = self.step
        if strategy == "beam":
            step, states = self.beam_step(states, options["beam_size"])
        start_ids = ops.full((ops.shape(memory)[0],), start_id, "int32")
        return search(
            step,
            states,
            start_ids,
            end_id,
            max_length,
            # A copying step gives log-probabilities, the others logits.
            from_logits=self.copy is None,
            **options,
        )

    def beam_step(self, states, beam_size):
        """`(step, states)` for a beam search: what stays fixed per source
        (the memory's states; the source's ids with copy) leaves the states
        the beam reorders at every step, tiled once for the step to read."""
        if self.copy is None:
            carried, fixed = split_memory_states(states)
        else:
            carried, fixed = split_memory_states(states["cell"])
            fixed = (fixed, states["source_ids"])
        fixed = tile_batch(fixed, beam_size)

        def step(ids, carried):
            if self.copy is None:
                outputs = self.step(ids, [*carried, *fixed])
                return (outputs[0], split_memory_states(outputs[1])[0], *outputs[2:])
            memory_states, source_ids = fixed
            full = {"cell": [*carried, *memory_states], "source_ids": source_ids}
            log_probs, new, attention = self.copy_step(ids, full)
            return log_probs, split_memory_states(new["cell"])[0], attention

        return step, carried

    def generate(
        self,
        memory,
        memory_mask=None,
        initial_state=None,
        *,
        start_id,
        end_id,
        max_length,
        strategy="greedy",
        compiled=True,
        source_ids=None,
        **options,
    ):
        """Generates sequences from the encoder's memory.

        Args:
            memory: `(batch, Tv, memory_dim)`, the encoder's outputs.
            memory_mask: Optional bool `(batch, Tv)`, False at padding.
            initial_state: Optional initial state(s) of the wrapped cell.
            start_id: Python int, the first input token of every row.
            end_id: Python int, the end token.
            max_length: Python int >= 1, the most tokens generated.
            strategy: `"greedy"`, `"beam"` or `"sampling"`.
            compiled: Run the search compiled (default): a `tf.function` on
                TensorFlow, a `jax.jit` that takes the current weights as
                arguments on JAX, `torch.compile` without gradients on
                torch; traced once per input signature and options (on
                torch, while dynamo's recompile limit allows). False runs
                it eagerly.
            source_ids: int `(batch, Tv)`, the source in the extended
                vocabulary; required with copy (ignored without).
            **options: The strategy's arguments (`keras_attn.greedy_search`,
                `beam_search`, `sampling_search`): `stop_ids`, `min_length`,
                `banned_ids`, `no_repeat_ngram_size`, `processors`;
                `beam_size` (default 4), `length_penalty`,
                `num_hypotheses`; `temperature`, `top_k`, `top_p`, `seed`
                (default: the decoder's `SeedGenerator`).

        Returns:
            A `keras_attn.search.DecodingResult`.
        """
        self.check_options(strategy, end_id, options)
        options = dict(
            options,
            start_id=start_id,
            end_id=end_id,
            max_length=max_length,
            strategy=strategy,
        )
        if self.copy is None:
            source_ids = None
        else:
            source_ids = check_source_ids(source_ids, memory)
        self._build_for(memory, memory_mask, initial_state, source_ids)
        if not compiled:
            return self.search(
                memory, memory_mask, initial_state, source_ids=source_ids, **options
            )
        return self._compiled(options, memory, memory_mask, initial_state, source_ids)

    def check_options(self, strategy, end_id, options):
        """Refuses a mistaken `generate` argument in one line, eagerly, before
        any trace (whose errors TensorFlow rewrites): the strategy, its
        options, and the end and stop ids against a `Dense` output layer's
        vocabulary (the search checks them against any other's)."""
        search_options(strategy, options)
        stop_ids = check_stop_ids(options.get("stop_ids", ()))
        vocab = getattr(self.output_layer, "units", None)
        check_ids_in_vocabulary(end_id, stop_ids, vocab)

    def _generate_function(self, options):
        def generate(memory, memory_mask, initial_state, source_ids):
            return self.search(
                memory, memory_mask, initial_state, source_ids=source_ids, **options
            )

        return generate

    def _build_for(self, memory, memory_mask, initial_state, source_ids):
        """Builds the layers eagerly (a compiled search creates no weights)."""
        if self.built:
            return
        ids = ops.zeros((ops.shape(memory)[0], 1), "int32")
        self(ids, memory, memory_mask, initial_state, source_ids=source_ids)

    def get_config(self):
        config = super().get_config()
        config.update(
            embedding=keras.saving.serialize_keras_object(self.embedding),
            cell=keras.saving.serialize_keras_object(self.rnn),
            output_layer=keras.saving.serialize_keras_object(self.output_layer),
        )
        if self.cell.carries_coverage:
            config["coverage_loss_weight"] = self.coverage_loss_weight
        if self.copy is not None:
            config.update(
                copy=keras.saving.serialize_keras_object(self.copy),
                num_oov=self.num_oov,
                unk_id=self.unk_id,
                copy_gate_state=self.copy_gate_state,
            )
        return config
