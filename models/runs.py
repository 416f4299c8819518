"""A run folder's text features and trained model, for whoever loads a run.

Training writes `runs/<name>/` (config, vocabulary, `model.keras`); export
and the benchmarks read it back through here, without importing training.
"""

from pathlib import Path

import keras

from models.config import SummarizerConfig
from models.features import TextFeatures

# Registers `HeadlineSummarizer` with Keras, which `load_trained_model` needs.
from models.summarizer import HeadlineSummarizer  # noqa: F401


def make_features(vocabulary, config):
    """`TextFeatures` of `vocabulary` as `config` sets them."""
    return TextFeatures(
        vocabulary,
        config.max_source_length,
        config.max_target_length,
        normalization=config.normalization,
    )


def save_vocabulary(vocabulary, path):
    Path(path).write_text("\n".join(vocabulary) + "\n", encoding="utf-8")


def load_vocabulary(path):
    return Path(path).read_text(encoding="utf-8").rstrip("\n").split("\n")


def load_run(run_dir):
    """Config and text features of an existing run folder."""
    run_dir = Path(run_dir)
    config = SummarizerConfig.load(run_dir / "config.json")
    vocabulary = load_vocabulary(run_dir / "vocab.txt")
    return config, make_features(vocabulary, config)


def load_trained_model(run_dir):
    """A finished run's model (`model.keras`, the best weights), for inference."""
    return keras.saving.load_model(Path(run_dir) / "model.keras", compile=False)
