"""What the model is: `SummarizerConfig`, and the text forms of its data.

How it trains, fine-tunes and decodes are `models.settings.fit`, `.risk`
and `.search`. Plain dataclasses with no TensorFlow import, so that
`train.py --help` and other tools can read the defaults without loading a
framework.
"""

import dataclasses
import json
from pathlib import Path

from models.settings.errors import UserError, check_at_least
from models.settings.flags import choices
from models.settings.json_files import write_json

ATTENTION_CHOICES = (
    "bahdanau",
    "bahdanau-normalized",
    "luong-dot",
    "luong-scale",
    "luong-general",
    "luong-concat",
    "scaled-dot",
)
CELL_CHOICES = ("lstm", "gru")


# The vocabulary's reserved tokens (`models.text.RESERVED`: padding,
# unknown, start, end), which every vocabulary holds first.
RESERVED_TOKENS = 4

# Text forms of the vocabulary (`models.text.normalize`).
NORMALIZATION_CHOICES = ("gigaword", "general")
# The fields that None leaves to the training data: a run settles them when
# it starts, and its `config.json` records the values.
SETTLED_FROM_DATA = ("max_source_length", "max_target_length", "normalization")


def check_normalization(normalization):
    """Raises `UserError` unless `normalization` is one of `NORMALIZATION_CHOICES`."""
    if normalization not in NORMALIZATION_CHOICES:
        raise UserError(
            f"`normalization` must be one of {', '.join(NORMALIZATION_CHOICES)}. "
            f"Received: normalization={normalization!r}"
        )


@dataclasses.dataclass
class SummarizerConfig:
    """Hyper-parameters of `HeadlineSummarizer` and of its text features.

    Attributes:
        vocab_size: Size of the word vocabulary, reserved tokens included.
        embedding_dim: Word embedding size (shared by encoder and decoder).
        hidden_size: Encoder output size (both directions together) and
            decoder state size.
        encoder_layers: Stacked bidirectional layers of the encoder (each
            layer's outputs, with dropout, are the next one's inputs; the
            decoder starts from the top layer's final states).
        cell: Recurrent cell, one of `CELL_CHOICES`.
        attention: Score function, one of `ATTENTION_CHOICES`.
        attention_units: Hidden size of the additive and concat scores.
        copy: Pointer-generator copying from the source.
        coverage: Coverage attention and loss (See et al. 2017).
        coverage_weight: Weight of the coverage loss.
        dropout: Dropout on embeddings and decoder outputs.
        word_dropout: Training only: the rate at which whole words of the
            source and of the decoder's input are dropped (their embedding
            zeroed), a regularizer for small data (Sennrich et al. 2016,
            "Edinburgh Neural Machine Translation Systems for WMT 16").
        label_smoothing: Training only: the loss mixes the target's
            negative log-likelihood with this weight of the vocabulary
            distribution's cross-entropy against the uniform one (Szegedy
            et al. 2016), on the vocabulary part of the copy mixture.
            `val_loss` includes the term too. 0 turns it off.
        tie_embeddings: Output layer shares the embedding matrix.
        max_source_length: Source tokens kept (the rest is truncated).
            None: chosen from the training data's lengths
            (`models.training.chosen_lengths`).
        max_target_length: Headline tokens kept in training, `</s>`
            included, and the decoding limit. None: chosen from the
            training data's lengths (`models.training.chosen_lengths`).
        sampled_softmax: Training only: score each target against this many
            vocabulary words sampled per batch instead of the whole
            vocabulary (`models.model.sampled_softmax`: a step scores K words, not
            the vocabulary); 0 trains on the full softmax. Evaluation and decoding
            always use the full softmax: the training loss shown is then the
            sampled estimate, `val_loss` the exact one.
        normalization: Text form of the tokens, baked into the export:
            `"gigaword"` (lowercased, digits masked as `#`, as Gigaword's own
            text) or `"general"` (lowercased, digits kept). Either way the
            served headline takes case and digits back from the source.
            None: `gigaword` for Gigaword's own text, `general` for other
            data.
    """

    vocab_size: int = 10000
    embedding_dim: int = 128
    hidden_size: int = 256
    encoder_layers: int = 1
    cell: str = dataclasses.field(default="lstm", metadata=choices(CELL_CHOICES))
    attention: str = dataclasses.field(
        default="bahdanau", metadata=choices(ATTENTION_CHOICES)
    )
    attention_units: int = 128
    copy: bool = True
    coverage: bool = False
    coverage_weight: float = 1.0
    dropout: float = 0.3
    word_dropout: float = 0.0
    label_smoothing: float = 0.1
    tie_embeddings: bool = True
    max_source_length: int | None = None
    max_target_length: int | None = None
    sampled_softmax: int = dataclasses.field(default=1024, metadata={"metavar": "K"})
    normalization: str | None = dataclasses.field(
        default=None, metadata=choices(NORMALIZATION_CHOICES)
    )

    def __post_init__(self):
        if self.attention not in ATTENTION_CHOICES:
            raise UserError(
                f"`attention` must be one of {', '.join(ATTENTION_CHOICES)}. "
                f"Received: attention={self.attention!r}"
            )
        if self.cell not in CELL_CHOICES:
            raise UserError(
                f"`cell` must be one of {', '.join(CELL_CHOICES)}. "
                f"Received: cell={self.cell!r}"
            )
        if self.vocab_size < RESERVED_TOKENS:
            raise UserError(
                f"`vocab_size` must be >= {RESERVED_TOKENS} (the reserved tokens). "
                f"Received: vocab_size={self.vocab_size}"
            )
        check_at_least(
            self, [("embedding_dim", 1), ("hidden_size", 1), ("attention_units", 1)]
        )
        if not 0 <= self.dropout < 1:
            raise UserError(
                f"`dropout` must be in [0, 1). Received: dropout={self.dropout}"
            )
        if not 0 <= self.sampled_softmax:
            raise UserError(
                "`sampled_softmax` must be >= 0 (0: full softmax). Received: "
                f"sampled_softmax={self.sampled_softmax}"
            )
        if not 0 <= self.word_dropout < 1:
            raise UserError(
                "`word_dropout` must be in [0, 1). Received: "
                f"word_dropout={self.word_dropout}"
            )
        if not 0 <= self.label_smoothing < 1:
            raise UserError(
                "`label_smoothing` must be in [0, 1). Received: "
                f"label_smoothing={self.label_smoothing}"
            )
        if self.normalization is not None:
            check_normalization(self.normalization)
        if not (isinstance(self.encoder_layers, int) and self.encoder_layers >= 1):
            raise UserError(
                "`encoder_layers` must be an int >= 1. Received: "
                f"encoder_layers={self.encoder_layers!r}"
            )
        if self.hidden_size % 2:
            raise UserError(
                "`hidden_size` is split between the two encoder directions and "
                f"must be even. Received: hidden_size={self.hidden_size}"
            )

    def unsettled(self):
        """The names of `SETTLED_FROM_DATA` still unset (None): chosen from
        the training data when a run starts
        (`models.training.chosen_lengths.settle_config`)."""
        return tuple(n for n in SETTLED_FROM_DATA if getattr(self, n) is None)

    def check_settled(self, names=SETTLED_FROM_DATA):
        """Raises `ValueError` if any of `names` (of `SETTLED_FROM_DATA`) is
        unset: the text features need them all, the model its source
        length."""
        unset = [n for n in self.unsettled() if n in names]
        if unset:
            raise ValueError(
                "`config` must be settled from the training data first "
                "(`models.training.chosen_lengths.settle_config`). Received: "
                f"{', '.join(f'{n}=None' for n in unset)}"
            )

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values):
        """The config of a saved `config.json`; a field it lacks takes its
        default, but `normalization`, which is `gigaword` there (a config
        without the field was trained on Gigaword's form)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise UserError(
                f"Config keys must be fields of {cls.__name__}. "
                f"Received: unknown keys {sorted(unknown)}"
            )
        return cls(**{"normalization": "gigaword", **values})

    def save(self, path):
        write_json(path, self.to_dict())

    @classmethod
    def load(cls, path):
        return cls.from_dict(json.loads(Path(path).read_text()))
