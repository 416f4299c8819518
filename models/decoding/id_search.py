"""The summarizer's search on token ids, on any backend: the encoder and
keras_attn's greedy or beam search over the decoder's one-token step.

`decode_ids` is the search that the exported graph runs
(`headline_module.HeadlineModule`) between its text steps; Keras ops only,
so a training process without TensorFlow (`train.py --backend jax`)
validates with the same search. `IdHeadlines` is that process's validation
ROUGE sample: prepared source ids to normalized headlines (the data's form,
which ROUGE compares with the references), the search compiled once under
`jax.jit` on JAX.
"""

import json
from pathlib import Path

import keras
import numpy as np
from keras import ops

import keras_attn
from models.text.ids import END_ID, PAD_ID, RESERVED, START_ID, UNK_ID


def decode_ids(
    model,
    ids,
    ext_ids,
    options,
    *,
    beam_size,
    length_penalty,
    min_length,
    max_length=None,
    end_penalty=None,
    num_hypotheses=1,
    output_kernel=None,
):
    """Source ids to a `keras_attn.search.DecodingResult`: encoder and search.

    Args:
        model: A `HeadlineSummarizer` or `SummarizerEnsemble`.
        ids: int32 `(batch, S)`, the source's ids (copies as `UNK_ID`).
        ext_ids: int32 `(batch, S)`, its extended ids (copies as
            `vocab_size` plus their first source position).
        options: The `SearchOptions` searched with.
        beam_size: Beams (1: greedy search).
        length_penalty, min_length, max_length, end_penalty: As
            `HeadlineModule.search` takes them (`max_length`: None, the
            options' limit alone).
        num_hypotheses: Beam search's hypotheses per example.
        output_kernel: The output layer's kernel made once
            (`model.output_kernel`); None: made here.
    """
    processors = []
    if max_length is not None:
        processors.append(keras_attn.MaxLength(max_length, END_ID))
    if end_penalty is None and options.greedy_end_penalty:
        end_penalty = options.greedy_end_penalty
    if beam_size == 1 and end_penalty is not None:
        processors.append(keras_attn.EndPenalty(end_penalty, END_ID))
    # Under XLA the encoder skips the rows past their length, less work in
    # fixed shapes; on TensorFlow's executor Keras' layer, whose two
    # directions run on two cores at once, is the better one.
    state, memory = model.initial_decoder_state(
        ids, ext_ids, options.shortlist, by_length=options.xla
    )
    start_ids = ops.zeros_like(ids[:, 0]) + START_ID
    banned = [PAD_ID, START_ID] + ([UNK_ID] if options.suppress_unk else [])
    common = dict(
        end_id=END_ID,
        max_length=options.max_length,
        min_length=min_length,
        banned_ids=banned,
        no_repeat_ngram_size=options.no_repeat_ngram_size,
        processors=processors,
    )
    kernel = output_kernel  # once, not per step
    if kernel is None:
        kernel = model.output_kernel(options.shortlist)
    if beam_size > 1:
        memory = keras_attn.tile_batch(memory, beam_size)

        def beam_step(ids, state):
            return model.step(ids, state, memory, output_kernel=kernel)

        return keras_attn.beam_search(
            beam_step,
            state,
            start_ids,
            beam_size=beam_size,
            length_penalty=length_penalty,
            num_hypotheses=num_hypotheses,
            **common,
        )

    def step(ids, state):
        log_probs, decoder, attention = model.step(
            ids, state["decoder"], state["memory"], output_kernel=kernel
        )
        return log_probs, dict(state, decoder=decoder), attention

    # Ended rows leave the batch, and the memory with them; where shapes are
    # fixed (XLA, `jax.jit`), the batch is halved as half its rows end.
    fixed = options.xla or keras.backend.backend() == "jax"
    return keras_attn.greedy_search(
        step,
        {"decoder": state, "memory": memory},
        start_ids,
        drop_finished="halves" if fixed else True,
        **common,
    )


def normalized_headlines(ids, lengths, source_tokens, words):
    """Extended ids to normalized headlines, as the export's
    `TextFeatures.decode` writes them: a copy id is its source token,
    reserved ids print nothing but the unknown word's, tokens joined by
    spaces.

    Args:
        ids: int `(batch, T)` numpy array.
        lengths: int `(batch,)`: tokens before the end token.
        source_tokens: Each row's normalized source tokens, list of str.
        words: The vocabulary, the id a word's index.

    Returns:
        list of str, one per row.
    """
    vocab_size = len(words)
    headlines = []
    for row, length, tokens in zip(ids, lengths, source_tokens, strict=True):
        out = []
        for i in row[: int(length)].tolist():
            if i < len(RESERVED) and i != UNK_ID:
                continue
            if i < vocab_size:
                out.append(words[i])
            else:
                out.append(tokens[min(i - vocab_size, max(len(tokens) - 1, 0))])
        headlines.append(" ".join(out))
    return headlines


class IdHeadlines:
    """The validation ROUGE sample's greedy headlines, from its prepared ids.

    The sample file (`write_sample`, by the process that prepared the run's
    arrays) holds each document's source ids and extended ids as the
    export's text steps make them, its normalized tokens (for copies) and
    its reference. Called with a model, it decodes the sample in batches of
    `batch_size` rows padded to one shape, compiled once under `jax.jit` on
    JAX (the variables passed in, `keras.StatelessScope`), eagerly on
    the other backends.

    Args:
        path: The sample file (`prepared/rouge-N.json`).
        words: The run's vocabulary.
        options: The `SearchOptions` searched with.
        batch_size: Rows per search.
    """

    def __init__(self, path, words, options, batch_size=64):
        sample = json.loads(Path(path).read_text(encoding="utf-8"))
        self.references = sample["references"]
        self.tokens = sample["tokens"]
        self.words = list(words)
        self.options = options
        self.batch_size = int(batch_size)
        width = max(1, max(len(t) for t in sample["ids"]))
        rows = -(-len(self.references) // self.batch_size) * self.batch_size
        self.ids = np.zeros((rows, width), np.int32)
        self.ext_ids = np.zeros((rows, width), np.int32)
        for row, (ids, ext) in enumerate(
            zip(sample["ids"], sample["ext_ids"], strict=True)
        ):
            self.ids[row, : len(ids)] = ids
            self.ext_ids[row, : len(ext)] = ext
        self._compiled = {}

    def _search(self, model):
        def search(ids, ext_ids):
            result = decode_ids(
                model,
                ids,
                ext_ids,
                self.options,
                beam_size=1,
                length_penalty=self.options.length_penalty,
                min_length=self.options.min_length,
            )
            return result.ids, result.lengths

        if keras.backend.backend() != "jax":
            return search
        import jax

        variables = list(model.variables)

        @jax.jit
        def stateless(values, ids, ext_ids):
            mapping = list(zip(variables, values, strict=True))
            with keras.StatelessScope(state_mapping=mapping):
                return search(ids, ext_ids)

        return lambda ids, ext_ids: stateless(
            [v.value for v in variables], ids, ext_ids
        )

    def __call__(self, model):
        if id(model) not in self._compiled:
            self._compiled = {id(model): self._search(model)}
        search = self._compiled[id(model)]
        headlines = []
        for start in range(0, len(self.references), self.batch_size):
            rows = slice(start, start + self.batch_size)
            ids, lengths = search(self.ids[rows], self.ext_ids[rows])
            count = min(self.batch_size, len(self.references) - start)
            headlines += normalized_headlines(
                ops.convert_to_numpy(ids)[:count],
                ops.convert_to_numpy(lengths)[:count],
                self.tokens[start : start + count],
                self.words,
            )
        return headlines


def write_sample(path, sources, references):
    """Writes the validation ROUGE sample that `IdHeadlines` reads.

    Args:
        path: The file, written whole.
        sources: Per document, its `ids`, `ext_ids` and normalized `tokens`
            (the export's text steps' `encode_source`, one row each,
            padding removed).
        references: Their references, str.
    """
    from models.settings.json_files import write_json

    write_json(
        path,
        {
            "ids": [list(map(int, s["ids"])) for s in sources],
            "ext_ids": [list(map(int, s["ext_ids"])) for s in sources],
            "tokens": [list(s["tokens"]) for s in sources],
            "references": list(references),
        },
        indent=None,
    )
