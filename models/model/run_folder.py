"""A run folder's text features and trained model, for whoever loads a run.

Training writes `runs/<name>/` (config, vocabulary, `model.keras`); export
and the benchmarks read it back through here, without importing training.
"""

from pathlib import Path

import keras

from models.model.ensemble import SummarizerEnsemble
from models.model.members import is_served

# Also registers `HeadlineSummarizer` with Keras, which `load_trained_model`
# needs.
from models.model.summarizer import HeadlineSummarizer
from models.settings.errors import UserError
from models.settings.folder_layout import (
    CONFIG_FILE,
    DATA_SOURCE_FILE,
    LENGTHS_FILE,
    MEMBER_PREFIX,
    MODEL_FILE,
    RISK_DIR,
    SAVED_MODEL_FILE,
    VOCABULARY_FILE,
    member_rank,
)
from models.settings.json_files import write_whole
from models.settings.model import SummarizerConfig


def make_features(vocabulary, config):
    """`TextFeatures` of `vocabulary` as `config` sets them; `config` is
    settled (`models.training.chosen_lengths.settle_config`)."""
    config.check_settled()
    # TensorFlow's text ops: imported when a run's text is read, so that a
    # training process without TensorFlow loads its config and vocabulary.
    from models.text.features import TextFeatures

    return TextFeatures(
        vocabulary,
        config.max_source_length,
        config.max_target_length,
        normalization=config.normalization,
    )


def save_vocabulary(vocabulary, path):
    """Writes `vocabulary`, one token a line, atomically (`write_whole`): a
    kill midway leaves the previous file, which a resumed run reads back."""
    write_whole(path, "\n".join(vocabulary) + "\n")


def load_vocabulary(path):
    return Path(path).read_text(encoding="utf-8").rstrip("\n").split("\n")


def load_run(run_dir):
    """Config and text features of an existing run folder."""
    config, vocabulary = load_config_and_vocabulary(run_dir)
    return config, make_features(vocabulary, config)


def load_config_and_vocabulary(run_dir):
    """`(config, vocabulary)` of an existing run folder."""
    run_dir = Path(run_dir)
    config = SummarizerConfig.load(run_dir / CONFIG_FILE)
    return config, load_vocabulary(run_dir / VOCABULARY_FILE)


def load_trained_model(run_dir, dtype_policy=None, members=None):
    """A finished run's model (`model.keras`, the best weights), for inference.

    A run trained with `--ensemble N` gives a `SummarizerEnsemble` of its
    members that finished (`models.model.members`); `members`: only the
    first `members` of them (1: the first member alone). `dtype_policy`: a
    Keras dtype policy to compute in (`"mixed_bfloat16"`), else the trained
    one.
    """
    paths = list(model_files(run_dir, members).values())
    models = [keras.saving.load_model(p, compile=False) for p in paths]
    if dtype_policy:
        models = [with_dtype_policy(m, dtype_policy) for m in models]
    return models[0] if len(models) == 1 else SummarizerEnsemble(models)


def with_dtype_policy(model, dtype_policy):
    """A copy of `model` whose layers compute in `dtype_policy`."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(dtype_policy)
    try:
        copy = HeadlineSummarizer(model.config)
    finally:
        keras.config.set_dtype_policy(previous)
    ids = keras.ops.ones((1, 2), "int32")
    copy({"source_ids": ids, "source_ext_ids": ids, "target_in": ids})
    copy.set_weights(model.get_weights())
    return copy


def model_files(run_dir, members=None):
    """`{name in an export: path}` of the trained models of a run folder.

    `model.keras`, then `member-K.keras` for the ensemble members that
    finished (`models.model.members`: an unfinished member is never served), each
    its minimum-risk fine-tuned weights where that stage ran; `members`: the
    first `members` of them only. An export's version folder, which holds
    them side by side under those names, gives them as they are, so that an
    export can be exported again or started from (`--init-from`) member by
    member.
    """
    if members is not None and members < 1:
        raise UserError(f"`members` must be >= 1. Received: members={members}")
    run_dir = Path(run_dir)
    found = sorted(
        run_dir.glob(f"{MEMBER_PREFIX}*/{MODEL_FILE}"),
        key=lambda p: member_rank(p.parent.name),
    )
    files = {
        name: _served_weights(path)
        for name, path in [(MODEL_FILE, run_dir / MODEL_FILE)]
        + [(f"{p.parent.name}.keras", p) for p in found]
        if is_served(path.parent)
    }
    if MODEL_FILE in files and (run_dir / SAVED_MODEL_FILE).is_file():
        exported = run_dir.glob(f"{MEMBER_PREFIX}*.keras")
        files.update(
            (p.name, p) for p in sorted(exported, key=lambda p: member_rank(p.stem))
        )
    return dict(list(files.items())[:members])


def export_files(run_dir, members=None):
    """`{name in an export: path}` of all an export copies from a run folder.

    The config and the vocabulary; the lengths and the data source, where
    the run recorded them; the trained models (`model_files`, `members` as
    there).
    """
    run_dir = Path(run_dir)
    files = {
        CONFIG_FILE: run_dir / CONFIG_FILE,
        VOCABULARY_FILE: run_dir / VOCABULARY_FILE,
    }
    for name in (LENGTHS_FILE, DATA_SOURCE_FILE):
        if (run_dir / name).is_file():
            files[name] = run_dir / name
    files.update(model_files(run_dir, members))
    return files


def _served_weights(model_file):
    """A member's minimum-risk fine-tuned model where the stage ran, else
    `model_file` (`models.training.risk_fine_tuning`)."""
    tuned = model_file.parent / RISK_DIR / MODEL_FILE
    return tuned if tuned.is_file() else model_file


def initial_model_files(init_from, members):
    """`{rank: model.keras}`: the file each of `members` members of a run
    starts from (`--init-from`); `{}` without `init_from`."""
    if not init_from:
        return {}
    init_from = Path(init_from)
    files = list(model_files(init_from).values())
    needed = [
        init_from / CONFIG_FILE,
        init_from / VOCABULARY_FILE,
        files[0] if files else init_from / MODEL_FILE,
    ]
    missing = [p.name for p in needed if not p.is_file()]
    if missing:
        raise UserError(
            "`init_from` must be a trained run folder (runs/<name>) or an "
            "export (saved_models/<name>/<version>), with config.json, "
            f"vocab.txt and model.keras; {', '.join(missing)} "
            f"missing. Received: init_from={str(init_from)!r}"
        )
    if len(files) < members:
        raise UserError(
            f"`init_from` has {len(files)} trained member(s), fewer than the "
            f"run's ensemble. Received: init_from={str(init_from)!r}, "
            f"ensemble={members}"
        )
    return dict(enumerate(files[:members]))
