"""Exports a trained summarizer as a SavedModel that turns text into headlines.

Apart from training: it takes a built `HeadlineSummarizer` and its
`TextFeatures`, and writes TensorFlow Serving's layout,
`<export_dir>/<version>/`, atomically (a temporary folder, then a rename), so
a crash never leaves a half-written version for a server to pick up.

Signatures (all take `documents`, tf.string `[batch]`):

* `serving_default`: beam search; `headlines` tf.string `[batch]`, `scores`
  float32 `[batch]` (length-normalised log-probability).
* `greedy`: the same outputs, greedy search.
* `attention`: beam search, plus `source_tokens` `[batch, S]`,
  `headline_tokens` `[batch, T]` and `attention` float32 `[batch, T, S]`.
"""

import dataclasses
import json
import os
import shutil
import tempfile
from pathlib import Path

import tensorflow as tf

import keras_attn
from models.config import SearchOptions
from models.features import END_ID, PAD_ID, START_ID, UNK_ID

_DOCUMENTS = tf.TensorSpec([None], tf.string, name="documents")


class HeadlineModule(tf.Module):
    """The exported graph: text features, encoder, decoder and search."""

    def __init__(self, model, features, options):
        super().__init__(name="headline_summarizer")
        self.model = model
        self.features = features
        self.options = options

    def search(self, documents, beam_size, length_penalty=None):
        """Headlines for `documents` (eager or in a `tf.function`).

        `length_penalty` (a float or a scalar tensor) overrides the options'
        one: one traced graph then serves every value.
        """
        options = self.options
        if length_penalty is None:
            length_penalty = options.length_penalty
        source = self.features.encode_source(documents)
        state, memory = self.model.initial_decoder_state(
            source["ids"], source["ext_ids"]
        )
        batch = tf.shape(documents)[0]
        start_ids = tf.fill([batch], START_ID)
        banned = [PAD_ID, START_ID] + ([UNK_ID] if options.suppress_unk else [])
        common = dict(
            end_id=END_ID,
            max_length=options.max_length,
            min_length=options.min_length,
            banned_ids=banned,
            no_repeat_ngram_size=options.no_repeat_ngram_size,
        )
        kernel = self.model.output_kernel()  # once, not at every step
        if beam_size > 1:
            memory = keras_attn.tile_batch(memory, beam_size)

        def step(ids, state):
            return self.model.step(ids, state, memory, output_kernel=kernel)

        if beam_size > 1:
            result = keras_attn.beam_search(
                step,
                state,
                start_ids,
                beam_size=beam_size,
                length_penalty=length_penalty,
                **common,
            )
        else:
            result = keras_attn.greedy_search(step, state, start_ids, **common)
        # The search returns `max_length` steps; keep those any row used.
        steps = tf.clip_by_value(
            tf.reduce_max(result.lengths) + 1, 1, options.max_length
        )
        ids, attention = result.ids[:, :steps], result.extras[:, :steps]
        tokens, headlines = self.features.decode(ids, result.lengths, source["tokens"])
        return {
            "headlines": headlines,
            "scores": result.scores,
            "source_tokens": source["tokens"],
            "headline_tokens": tokens,
            "attention": attention,
        }

    @tf.function(input_signature=[_DOCUMENTS])
    def beam(self, documents):
        out = self.search(documents, self.options.beam_size)
        return {"headlines": out["headlines"], "scores": out["scores"]}

    @tf.function(input_signature=[_DOCUMENTS])
    def greedy(self, documents):
        out = self.search(documents, 1)
        return {"headlines": out["headlines"], "scores": out["scores"]}

    @tf.function(input_signature=[_DOCUMENTS])
    def attention(self, documents):
        return self.search(documents, self.options.beam_size)


def headlines_in_batches(search_fn, documents, batch_size=128):
    """`search_fn(tf.string [n]) -> tf.string [n]` over `documents`, as str."""
    documents = tf.convert_to_tensor(documents, tf.string)
    headlines = []
    for start in range(0, int(tf.shape(documents)[0]), batch_size):
        out = search_fn(documents[start : start + batch_size])
        headlines += [h.decode("utf-8") for h in out.numpy()]
    return headlines


def next_version(export_dir):
    """1 + the largest integer version folder in `export_dir` (1 if none)."""
    versions = [int(p.name) for p in Path(export_dir).glob("*") if p.name.isdigit()]
    return max(versions, default=0) + 1


def export(
    model, features, export_dir, *, options=None, version=None, extra_files=None
):
    """Writes `<export_dir>/<version>/` atomically and returns its path.

    Args:
        model: A built `HeadlineSummarizer`.
        features: Its `TextFeatures`.
        export_dir: The model's folder, e.g. `saved_models/headlines`.
        options: `SearchOptions`.
        version: Integer version; the next free one by default.
        extra_files: dict of file name to text (written) or to a `Path`
            (copied), beside the SavedModel: the model config, say.
    """
    options = options or SearchOptions()
    export_dir = Path(export_dir)
    export_dir.mkdir(parents=True, exist_ok=True)
    version = version or next_version(export_dir)
    final = export_dir / str(version)
    if final.exists():
        raise FileExistsError(f"Version folder already exists: {final}")
    module = HeadlineModule(model, features, options)
    signatures = {
        "serving_default": module.beam.get_concrete_function(),
        "greedy": module.greedy.get_concrete_function(),
        "attention": module.attention.get_concrete_function(),
    }
    # A hidden temporary folder in the same directory: TF Serving ignores
    # names that are not integers, and the rename is atomic on one filesystem.
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-export-", dir=export_dir))
    try:
        tf.saved_model.save(module, str(tmp), signatures=signatures)
        files = {
            "search_options.json": json.dumps(dataclasses.asdict(options), indent=2)
        }
        files.update(extra_files or {})
        for name, content in files.items():
            if isinstance(content, Path):
                shutil.copy2(content, tmp / name)
            else:
                (tmp / name).write_text(content)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def export_run(run_dir, export_dir, options=None):
    """Exports the trained model of a run folder again, with today's code.

    What a new version of this package needs to serve a model trained with
    an older one (a faster search, say), without retraining. The decoding
    settings are `options`, else those tuned on validation by the run
    (`search_tuning.json`), else the defaults.
    """
    from models.training import load_run, load_trained_model

    run_dir = Path(run_dir)
    options = options or SearchOptions.tuned(run_dir)
    _, features = load_run(run_dir)
    model = load_trained_model(run_dir)
    files = {name: run_dir / name for name in ("config.json", "model.keras")}
    return export(model, features, export_dir, options=options, extra_files=files)


def main(argv=None):
    import argparse

    p = argparse.ArgumentParser(
        description="Export a trained run again as the next SavedModel version."
    )
    p.add_argument("--run-dir", required=True, help="runs/<name> of a finished run")
    p.add_argument("--export-dir", required=True, help="saved_models/<name>")
    p.add_argument(
        "--search-options",
        help="a search_options.json (default: the run's tuned settings)",
    )
    args = p.parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    options = None
    if args.search_options:
        options = SearchOptions(**json.loads(Path(args.search_options).read_text()))
    print(f"Exported {export_run(args.run_dir, args.export_dir, options)}")


if __name__ == "__main__":
    main()
