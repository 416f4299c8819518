"""Writes a trained summarizer's ids-level beam search as ONNX.

The SavedModel (`models.export.saved_model`) takes text: its tokenizer and
detokenizer are TensorFlow string ops (RE2 regexes, hash tables), which
tf2onnx cannot map to ONNX. What converts is the search from source ids to
headline ids: the encoder of every member, the ensemble's mean distribution
and the beam search, in one ONNX `Loop` (`HeadlineModule.search_ids`). The
version folder holds

* `headlines.onnx`: inputs `source_ids` int32 `[batch, S]` (extended ids:
  a word outside the vocabulary is `vocab_size` plus its first position in
  the source) and `source_lengths` int32 `[batch]`; outputs `ids` int32
  `[batch, max_length]` (the end token's id from `lengths` on), `lengths`
  int32 `[batch]`, `scores` float32 `[batch]`, `attention` float32
  `[batch, max_length, S]`;
* `vocab.txt`, one word a line, the line number its id;
* `onnx_model.json` (`ONNX_CONTRACT_FILE`): the inputs and outputs, the
  reserved ids, the text settings and the search's settings, what a client
  (`serving.onnx_client`) reads;
* `config.json`, the run's model config.

    python -m models.export --run-dir runs/headlines \
        --export-dir saved_models/headlines-onnx --format onnx
"""

import dataclasses
import json
from pathlib import Path

from models.settings.folder_layout import (
    ONNX_CONTRACT_FILE,
    ONNX_FILE,
    VOCABULARY_FILE,
)
from models.settings.version_folders import write_version

# The opset the library's searches are tested at (docs/deploy.md).
ONNX_OPSET = 17
INPUTS = {
    "source_ids": {"dtype": "int32", "shape": ["batch", "source_length"]},
    "source_lengths": {"dtype": "int32", "shape": ["batch"]},
}
OUTPUTS = {
    "ids": {"dtype": "int32", "shape": ["batch", "max_length"]},
    "lengths": {"dtype": "int32", "shape": ["batch"]},
    "scores": {"dtype": "float32", "shape": ["batch"]},
    "attention": {
        "dtype": "float32",
        "shape": ["batch", "max_length", "source_length"],
    },
}


def ids_search_function(module):
    """`HeadlineModule.search_ids` as a `tf.function` over any batch and
    source length: the function tf2onnx converts."""
    import tensorflow as tf

    spec = [
        tf.TensorSpec([None, None], tf.int32, name="source_ids"),
        tf.TensorSpec([None], tf.int32, name="source_lengths"),
    ]
    function = tf.function(module.search_ids, input_signature=spec, autograph=False)
    return function, spec


def contract(features, options):
    """The JSON a client reads beside `headlines.onnx`: a dict."""
    from models.export.text_contract import text_contract
    from models.text.features import DATA_UNK_TOKENS, END_ID, PAD_ID, START_ID, UNK_ID
    from models.text.tokenizing import MAX_CHARS

    return {
        "model": ONNX_FILE,
        "vocabulary": VOCABULARY_FILE,
        "opset": ONNX_OPSET,
        "inputs": INPUTS,
        "outputs": OUTPUTS,
        "ids": {"pad": PAD_ID, "unk": UNK_ID, "start": START_ID, "end": END_ID},
        "vocab_size": features.vocab_size,
        # Gigaword's own unknown-word markers: read as the unknown id, never
        # copied from the source.
        "unknown_tokens": list(DATA_UNK_TOKENS),
        "normalization": features.normalization,
        "max_chars": MAX_CHARS,
        "max_source_length": features.max_source_length,
        "search": {
            "beam_size": options.beam_size,
            "length_penalty": options.length_penalty,
            "min_length": options.min_length,
            "max_length": options.max_length,
            "no_repeat_ngram_size": options.no_repeat_ngram_size,
            "suppress_unk": options.suppress_unk,
            "shortlist": options.shortlist,
        },
        "text": text_contract(),
    }


def log1p_as_onnx(ctx, node, name, args):
    """tf2onnx's handler of TensorFlow's `Log1p`, which it lacks (the copy
    distribution's `logaddexp` holds one): `x * log(u) / (u - 1)` with
    `u = 1 + x`, and `x` where `u` rounds to 1; Eigen's own `log1p`."""
    import numpy as np
    from tf2onnx import utils

    x = node.input[0]
    one = ctx.make_const(
        utils.make_name("one"),
        np.array(1, utils.map_onnx_to_numpy_type(ctx.get_dtype(x))),
    ).output[0]
    u = ctx.make_node("Add", [x, one]).output[0]
    ratio = ctx.make_node("Div", [x, ctx.make_node("Sub", [u, one]).output[0]])
    scaled = ctx.make_node(
        "Mul", [ctx.make_node("Log", [u]).output[0], ratio.output[0]]
    )
    node.type = "Where"
    ctx.replace_inputs(
        node, [ctx.make_node("Equal", [u, one]).output[0], x, scaled.output[0]]
    )


def select_as_where(ctx, node, name, args):
    """tf2onnx's handler of TensorFlow's `Select`/`SelectV2` as ONNX's
    `Where`, always: tf2onnx writes a float select as `x * c + y * (1 - c)`
    unless it sees an infinity in the condition's op or a constant branch,
    and a branch that is `-inf` (a token every ensemble member bans, in the
    shift of `logsumexp`) then gives `-inf * 0`, NaN."""
    from tf2onnx.onnx_opset.controlflow import Select

    node.set_attr("handles_nan", True)
    Select.version_9(ctx, node)


# TensorFlow ops whose tf2onnx conversion is missing or wrong for the search.
OP_HANDLERS = {
    "Log1p": (log1p_as_onnx, []),
    "Select": (select_as_where, []),
    "SelectV2": (select_as_where, []),
}


def write_onnx(module, path):
    """Converts `module`'s ids-level search (tf2onnx) and writes it to `path`."""
    import tf2onnx

    from keras_attn.search import writes_by_select

    function, spec = ids_search_function(module)
    # Traced inside: tf2onnx cannot convert the search's `tf.TensorArray`s.
    with writes_by_select():
        tf2onnx.convert.from_function(
            function,
            input_signature=spec,
            opset=ONNX_OPSET,
            custom_op_handlers=OP_HANDLERS,
            output_path=str(path),
        )


def export_onnx(model, features, export_dir, *, options=None, extra_files=None):
    """Writes `<export_dir>/<version>/` with `headlines.onnx`, its contract,
    the vocabulary and `extra_files` (the config, say) atomically; returns
    its path. The search is `options`' beam search, without XLA (the ONNX
    graph is ONNX Runtime's to optimise)."""
    from models.decoding.headline_module import HeadlineModule
    from models.settings.search import SearchOptions

    options = dataclasses.replace(options or SearchOptions(), xla=False)
    module = HeadlineModule(model, features, options, frozen=True)
    words = [w.decode("utf-8") for w in features.words.numpy().tolist()]
    files = {
        ONNX_CONTRACT_FILE: json.dumps(contract(features, options), indent=2),
        # `models.model.run_folder.save_vocabulary`'s format.
        VOCABULARY_FILE: "\n".join(words) + "\n",
    }
    files.update(extra_files or {})
    return write_version(
        export_dir, lambda tmp: write_onnx(module, Path(tmp) / ONNX_FILE), files
    )
