"""Headlines from an exported SavedModel, through its signatures, in batches.

The one client of an export: it loads `saved_models/<name>/<version>` (or
the newest version of `saved_models/<name>`), lists its signatures, and
decodes documents batch by batch with a progress bar. Evaluation, the
teacher of a distillation, the benchmarks and the server load exports
here; validation and tuning decode with an unsaved `HeadlineModule`'s search
through the same batch loop (`headlines_in_batches`).

Only TensorFlow and `models.settings.version_folders` are imported (tqdm too, when a
progress bar is asked for), and TensorFlow only when a model is loaded or
called: the server imports this module without any model code, and the
command lines answer `--help` before TensorFlow loads.
"""

import contextlib
import os
from pathlib import Path

import numpy as np

from models.settings.errors import UserError
from models.settings.version_folders import SAVED_MODEL_FILE, resolve_version_dir

DEFAULT_SIGNATURE = "serving_default"


def load_saved_model(saved_model):
    """Loads an export, or passes an already loaded SavedModel through.

    Args:
        saved_model: `saved_models/<name>/<version>`, `saved_models/<name>`
            (its newest complete integer version), or a loaded SavedModel.

    Returns:
        The object `tf.saved_model.load` returns.

    Raises:
        UserError: when the folder holds no SavedModel.
    """
    if not isinstance(saved_model, str | os.PathLike):
        return saved_model
    import tensorflow as tf

    return tf.saved_model.load(resolve_version_dir(saved_model))


def signature_defs(saved_model_dir):
    """The servable `SignatureDef` protos of an export, by name.

    Read from the graph's file: nothing is loaded, so this is cheap enough to
    check an export before loading it.

    Args:
        saved_model_dir: `saved_models/<name>/<version>`, or
            `saved_models/<name>` for its newest version.

    Returns:
        `{signature name: SignatureDef}`, without `__saved_model_init_op`.
    """
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    path = Path(resolve_version_dir(saved_model_dir)) / SAVED_MODEL_FILE
    proto.ParseFromString(path.read_bytes())
    return {
        name: sig
        for name, sig in proto.meta_graphs[0].signature_def.items()
        if not name.startswith("__")  # __saved_model_init_op is not servable.
    }


def signature_names(saved_model):
    """The sorted signature names of an export folder or a loaded SavedModel.

    A folder is read without loading it (`signature_defs`).
    """
    if isinstance(saved_model, str | os.PathLike):
        return sorted(signature_defs(saved_model))
    return sorted(saved_model.signatures)


def get_signature(saved_model, name=DEFAULT_SIGNATURE):
    """The signature `name` of a loaded SavedModel (or of an export folder).

    Raises:
        UserError: when the SavedModel has no such signature; the message
            lists those it has.
    """
    signatures = load_saved_model(saved_model).signatures
    if name not in signatures:
        raise UserError(
            f"SavedModel has no '{name}' signature: it must be one of "
            f"{sorted(signatures)}. Received: signature='{name}'"
        )
    return signatures[name]


def call_signature(function, documents):
    """Calls a signature on a batch of documents.

    Args:
        function: A signature with one batched `tf.string` input (the export
            names it `documents`; any single name is accepted).
        documents: The batch, `str` or `bytes`.

    Returns:
        The signature's outputs, `{name: tf.Tensor}`, each batch-major.
    """
    import tensorflow as tf

    # Signatures take keyword arguments only.
    (input_name,) = function.structured_input_signature[1].keys()
    return function(**{input_name: tf.constant(list(documents), dtype=tf.string)})


def strings(tensor):
    """A tf.string tensor (any rank) as nested lists of Python `str`."""
    array = np.asarray(tensor.numpy(), dtype=object)
    return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(array).tolist()


def rows(tensor):
    """The rows of a batch-major output: `str` (nested lists of them for
    higher ranks) for tf.string, numpy values otherwise."""
    if tensor.dtype.name == "string":
        return strings(tensor)
    return list(tensor.numpy())


def _progress_bar(total, desc, enabled):
    """A tqdm bar over `total` documents, or None when none is asked for."""
    if not enabled:
        return contextlib.nullcontext()
    # The summarizer's dependency; the server never asks for a bar.
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="doc")


def decode_in_batches(decode, documents, batch_size, progress=False, desc=None):
    """`decode(batch of documents) -> one result per document`, over `documents`.

    The one batch loop: every client of a decoder (a signature of an export,
    an unsaved module's search) walks its documents here.

    Args:
        decode: Takes a list of at most `batch_size` documents and returns a
            list of as many results.
        documents: The documents (str or bytes).
        batch_size: Documents per call of `decode`.
        progress: Whether to show a tqdm progress bar.
        desc: The progress bar's label.

    Returns:
        The results, one per document, in order.

    Raises:
        UserError: when `batch_size` is below 1.
    """
    if batch_size < 1:
        raise UserError(f"`batch_size` must be >= 1. Received: batch_size={batch_size}")
    documents = list(documents)
    results = []
    with _progress_bar(len(documents), desc, progress) as bar:
        for start in range(0, len(documents), batch_size):
            batch = documents[start : start + batch_size]
            results.extend(decode(batch))
            if bar is not None:
                bar.update(len(batch))
    return results


def decode_outputs(
    saved_model,
    documents,
    *,
    signature=DEFAULT_SIGNATURE,
    outputs=("headlines", "scores"),
    batch_size=64,
    progress=True,
):
    """Several outputs of a signature for each document, batch by batch.

    Args:
        saved_model: An export folder (`load_saved_model`) or a loaded
            SavedModel; load it once and pass it for repeated calls.
        documents: `N` source documents.
        signature: The signature's name (`get_signature`).
        outputs: Names of the outputs to return, e.g. `"headlines"`,
            `"scores"`, or the `attention` signature's `"attention"`,
            `"source_words"` and `"headline_words"`.
        batch_size: Documents per call.
        progress: Whether to show a tqdm progress bar.

    Returns:
        `N` dictionaries `{output: value}`, one per document: strings as
        `str` (nested lists of them for the word outputs), numbers as numpy
        values. Outputs padded per batch (`attention`, the words) keep the
        padding of their batch: rows of `""` words and zero weights.

    Raises:
        UserError: for a missing signature, an unknown output or a
            `batch_size` below 1.
    """
    function = get_signature(saved_model, signature)
    known = sorted(function.structured_outputs)
    unknown = [name for name in outputs if name not in known]
    if unknown:
        raise UserError(
            f"`outputs` must be outputs of the '{signature}' signature, one of "
            f"{known}. Received: outputs={list(outputs)}"
        )

    def decode(batch):
        values = call_signature(function, batch)
        columns = {name: rows(values[name]) for name in outputs}
        return [
            dict(zip(columns, row, strict=True))
            for row in zip(*columns.values(), strict=True)
        ]

    return decode_in_batches(
        decode, documents, batch_size, progress=progress, desc=signature
    )


def decode_documents(
    saved_model,
    documents,
    *,
    signature=DEFAULT_SIGNATURE,
    batch_size=64,
    progress=True,
    output="normalized_headlines",
):
    """Decodes headlines with a SavedModel signature, batch by batch.

    Args:
        saved_model: `saved_models/<name>/<version>` (or `saved_models/<name>`
            for the newest version), or an already loaded SavedModel.
        documents: `N` source documents.
        signature: name of a signature mapping `documents: tf.string[None]` to
            `{"headlines": tf.string[None], ...}` (`serving_default` is beam
            search, `greedy` greedy decoding; `n_best` gives a list per
            document).
        batch_size: documents per call.
        progress: whether to show a tqdm progress bar.
        output: the signature's output to read: `"normalized_headlines"` (the
            data's form, for ROUGE) or `"headlines"` (readable text).

    Returns:
        The `N` decoded headlines.
    """
    records = decode_outputs(
        saved_model,
        documents,
        signature=signature,
        outputs=(output,),
        batch_size=batch_size,
        progress=progress,
    )
    return [record[output] for record in records]


def headlines_in_batches(search, documents, batch_size=128):
    """`search(tf.string [n]) -> tf.string [n]` over `documents`, as str.

    The client of a model not yet exported: for ROUGE during training and
    tuning, `search` returns a `HeadlineModule`'s `normalized_headlines`.
    """
    import tensorflow as tf

    return decode_in_batches(
        lambda batch: strings(search(tf.constant(batch, tf.string))),
        documents,
        batch_size,
    )
