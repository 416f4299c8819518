"""Configurations: what the model is, how it trains, how it decodes.

Plain dataclasses with no TensorFlow import, so that `train.py --help` and
other tools can read the defaults without loading a framework.
"""

import dataclasses
import json
from pathlib import Path

from models.settings.errors import UserError
from models.settings.folder_layout import SEARCH_TUNING_FILE

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
MIXED_PRECISION_CHOICES = ("mixed_float16", "mixed_bfloat16")


def _choices(values):
    """Field metadata: the command line offers exactly `values`."""
    return {"choices": values}


# The splits of a dataset, by their TFDS names (`models.data.load_split`).
SPLITS = ("train", "validation", "test")

# Text forms of the vocabulary (`models.text.normalize`).
NORMALIZATION_CHOICES = ("gigaword", "general")


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
        max_source_length: Source tokens kept (the rest is truncated). On
            the command line, unset: chosen from the training data's lengths
            (`models.training.chosen_lengths`).
        max_target_length: Headline tokens kept in training, `</s>`
            included, and the decoding limit. On the command line, unset:
            chosen from the training data's lengths (`models.training.chosen_lengths`).
        sampled_softmax: Training only: score each target against this many
            vocabulary words sampled per batch instead of the whole
            vocabulary (`models.model.sampled_softmax`: a step scores K words, not
            the vocabulary); 0 trains on the full softmax. Evaluation and decoding
            always use the full softmax: the training loss shown is then the
            sampled estimate, `val_loss` the exact one.
        normalization: Text form of the tokens, baked into the export:
            `"gigaword"` (lowercased, digits masked as `#`, as Gigaword's own
            text) or `"general"` (lowercased, digits kept). Either way the
            served headline takes case and digits back from the source. On
            the command line, unset: `gigaword` for Gigaword's own text,
            `general` for other data.
    """

    vocab_size: int = 10000
    embedding_dim: int = 128
    hidden_size: int = 256
    encoder_layers: int = 1
    cell: str = dataclasses.field(default="lstm", metadata=_choices(CELL_CHOICES))
    attention: str = dataclasses.field(
        default="bahdanau", metadata=_choices(ATTENTION_CHOICES)
    )
    attention_units: int = 128
    copy: bool = True
    coverage: bool = False
    coverage_weight: float = 1.0
    dropout: float = 0.3
    word_dropout: float = 0.0
    label_smoothing: float = 0.1
    tie_embeddings: bool = True
    # The flags' defaults are None: the pipeline then chooses from the data.
    max_source_length: int = dataclasses.field(default=64, metadata={"default": None})
    max_target_length: int = dataclasses.field(default=20, metadata={"default": None})
    sampled_softmax: int = dataclasses.field(default=1024, metadata={"metavar": "K"})
    # The flag's default is None: the pipeline then chooses from the data.
    normalization: str = dataclasses.field(
        default="gigaword",
        metadata={**_choices(NORMALIZATION_CHOICES), "default": None},
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

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values):
        """The config of a saved `config.json`; a field it lacks takes its
        default."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise UserError(
                f"Config keys must be fields of {cls.__name__}. "
                f"Received: unknown keys {sorted(unknown)}"
            )
        return cls(**values)

    def save(self, path):
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path):
        return cls.from_dict(json.loads(Path(path).read_text()))


@dataclasses.dataclass
class TrainOptions:
    """How to train (not what: that is `SummarizerConfig`).

    Attributes:
        batch_size: Examples per batch.
        learning_rate: Adam's learning rate.
        clipnorm: Gradients are clipped to this global norm.
        validate_every: Training examples between two validations,
            nominally: small data repeats its pass until an interval is
            full, large data validates inside a pass (`models.training.schedule`).
        patience: Validations without a better validation score before
            early stopping ends a member.
        min_train_examples: Early stopping cannot end a member before it has
            trained this many examples.
        train_examples: Most training examples of a member. A member has
            finished when early stopping ended it or it trained this many;
            only finished members are exported.
        max_train_minutes: Opt-in cap on this command's training time, over
            all members and stages (None: no cap). A member it cuts is
            unfinished: it is not exported, and the same command resumes it.
        stop_after_validations: Opt-in cap on the validations this command
            runs, over all members and stages (None: no cap); a member it
            cuts is unfinished, as with `max_train_minutes`, but the cut
            falls at the same validation on every machine.
        checkpoint_every: Steps between backups within a validation interval
            (None: a backup at each validation only). A rerun resumes from
            the last backup; from one within an interval, that interval
            starts over from the backed-up weights, so the run no longer
            repeats an uncut one exactly.
        min_count: Words seen fewer times stay out of the vocabulary.
        validation_rouge_examples: Validation examples decoded for ROUGE at
            each validation (0: follow the validation loss instead).
        validation_loss_examples: Validation examples the validation loss
            is computed on at each validation, the split's first (a large
            split's whole loss pass would cost more than the training
            between two validations).
        lr_decay: At a validation plateau the learning rate is multiplied
            by this (1: a constant rate).
        lr_decay_patience: Validations without a better validation score
            before the learning rate decays.
        ema_momentum: Validate, keep and export the exponential moving
            average of the weights with this momentum (0: the raw weights).
        jit_compile: XLA-compile the train step.
        mixed_precision: Keras mixed-precision policy, one of
            `MIXED_PRECISION_CHOICES` (None: float32).
        seed: Seed of the weights and of the data's order.
        ensemble: Members trained one after the other, with seeds `seed`,
            `seed + 1`, ...; the export decodes with their mean distribution
            (`models.model.ensemble`). The caps (`max_train_minutes`,
            `stop_after_validations`) count over all of them.
    """

    batch_size: int = 64
    learning_rate: float = 2e-3
    clipnorm: float = 2.0
    validate_every: int = 25_000
    patience: int = 5
    min_train_examples: int = 250_000
    train_examples: int = 20_000_000
    max_train_minutes: float | None = None
    stop_after_validations: int | None = None
    checkpoint_every: int | None = None
    min_count: int = 2
    validation_rouge_examples: int = 1000
    validation_loss_examples: int = 10_000
    lr_decay: float = 1.0
    lr_decay_patience: int = 2
    ema_momentum: float = 0.999
    jit_compile: bool = False
    mixed_precision: str | None = dataclasses.field(
        default=None, metadata=_choices(MIXED_PRECISION_CHOICES)
    )
    seed: int = 0
    ensemble: int = 3

    def __post_init__(self):
        if not 0 < self.lr_decay <= 1:
            raise UserError(
                f"`lr_decay` must be in (0, 1]. Received: lr_decay={self.lr_decay}"
            )
        if self.lr_decay_patience < 0:
            raise UserError(
                "`lr_decay_patience` must be >= 0. Received: "
                f"lr_decay_patience={self.lr_decay_patience}"
            )
        for name in (
            "validate_every",
            "train_examples",
            "batch_size",
            "validation_loss_examples",
        ):
            if getattr(self, name) < 1:
                raise UserError(
                    f"`{name}` must be >= 1. Received: {name}={getattr(self, name)}"
                )
        for name in ("patience", "min_train_examples"):
            if getattr(self, name) < 0:
                raise UserError(
                    f"`{name}` must be >= 0. Received: {name}={getattr(self, name)}"
                )
        for name in (
            "max_train_minutes",
            "stop_after_validations",
            "checkpoint_every",
        ):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise UserError(
                    f"`{name}` must be > 0, or unset for none. Received: {name}={value}"
                )
        if self.ensemble < 1:
            raise UserError(
                f"`ensemble` must be >= 1. Received: ensemble={self.ensemble}"
            )


RISK_METHOD_CHOICES = ("beam", "sample")


@dataclasses.dataclass
class RiskOptions:
    """How minimum-risk fine-tuning runs (`train.py --risk-updates`).

    Edunov et al. 2018's recipe (fairseq's `sequence_risk` criterion) by
    default: the beam's n best, costs `100 * (1 - ROUGE)`, the candidates'
    distribution from their length-normalized log-probabilities, mixed with
    the likelihood loss.

    Attributes:
        risk_updates: Updates (batches) of the stage per member, over the
            whole training set pass after pass (0: no stage).
        risk_validate_every: Updates between validations (the last interval
            may be shorter).
        risk_patience: Validations without a better validation ROUGE-1
            before the stage stops.
        risk_candidates: Candidates per document: the beam's n best (or
            sampled headlines), the reference included if asked.
        risk_method: How the candidates are drawn, one of
            `RISK_METHOD_CHOICES`: the model's beam n best, or sampled
            headlines at `risk_temperature`.
        risk_include_reference: The reference is one of the candidates (at
            cost 0).
        risk_temperature: Temperature of the sampled candidates (sampling
            only).
        risk_alpha: Sharpness of the candidates' renormalised distribution.
        risk_length_normalize: The candidates' distribution is the softmax
            of their mean token log-probability (else of the summed one).
        risk_nll_weight: Weight `a` of the likelihood loss (label smoothing
            as in training) in `(1 - a) * risk + a * likelihood`, the risk on
            0-100 (fairseq's combined loss).
        risk_learning_rate: Adam's learning rate for the stage, after the
            warm-up.
        risk_warmup_updates: Updates over which the learning rate rises
            linearly from 0 (None: a tenth of `risk_updates`).
        risk_examples: Training pairs the stage reads (None: all).
    """

    risk_updates: int = 0
    risk_validate_every: int = 500
    risk_patience: int = 3
    risk_candidates: int = 8
    risk_method: str = dataclasses.field(
        default="beam", metadata=_choices(RISK_METHOD_CHOICES)
    )
    risk_include_reference: bool = False
    risk_temperature: float = 1.0
    risk_alpha: float = 1.0
    risk_length_normalize: bool = True
    risk_nll_weight: float = 0.5
    risk_learning_rate: float = 1e-4
    risk_warmup_updates: int | None = None
    risk_examples: int | None = None

    def __post_init__(self):
        for name, least in (
            ("risk_updates", 0),
            ("risk_validate_every", 1),
            ("risk_patience", 1),
        ):
            if getattr(self, name) < least:
                raise UserError(
                    f"`{name}` must be >= {least}. Received: "
                    f"{name}={getattr(self, name)}"
                )
        least = 2 if self.risk_include_reference else 1
        if self.risk_candidates < least:
            raise UserError(
                f"`risk_candidates` must be >= {least} (with the reference: "
                "it and one drawn headline). Received: "
                f"risk_candidates={self.risk_candidates}"
            )
        if self.risk_method not in RISK_METHOD_CHOICES:
            raise UserError(
                f"`risk_method` must be one of {RISK_METHOD_CHOICES}. "
                f"Received: risk_method={self.risk_method!r}"
            )
        if not 0 <= self.risk_nll_weight <= 1:
            raise UserError(
                "`risk_nll_weight` must be in [0, 1]. Received: "
                f"risk_nll_weight={self.risk_nll_weight}"
            )
        if self.risk_warmup_updates is None:
            self.risk_warmup_updates = self.risk_updates // 10
        if self.risk_warmup_updates < 0:
            raise UserError(
                "`risk_warmup_updates` must be >= 0. Received: "
                f"risk_warmup_updates={self.risk_warmup_updates}"
            )


@dataclasses.dataclass
class SearchOptions:
    """Decoding settings baked into the exported graph.

    Written beside the export as `search_options.json`, whose `min_length`,
    `max_length` and `length_penalty` are the defaults the server fills in
    for the `length_control` signature's inputs.

    Attributes:
        beam_size: Beams of the `serving_default` and `attention` signatures.
        length_penalty: GNMT's alpha: beams are ranked by log-probability
            over `((5 + n) / 6) ** length_penalty` (0: no normalisation).
        min_length: `</s>` is banned for the first `min_length` tokens.
        max_length: Most headline tokens. On `train.py`'s command line,
            unset: the run's `max_target_length`.
        no_repeat_ngram_size: Never repeat an n-gram of this size (0: off).
        suppress_unk: Never generate <unk> (off: Gigaword's test references
            hold UNK, which the model may then match; readable headlines
            leave it out).
        shortlist: Opt-in speed lever: if > 0, each step scores only the
            `shortlist` most frequent words and the source's words, and
            renormalises over them (`keras_attn.shortlist_log_distribution`):
            approximate. 0: the whole vocabulary, exact.
        xla: Opt-in speed lever: the encoder and search compiled by XLA
            (`jit_compile`), on a batch padded to a power of two and a source
            padded to a multiple of 16. The same model, computed in another
            order, so a near tie may fall the other way. The SavedModel then
            needs TensorFlow with XLA (pip's TensorFlow, the project's
            server); stock TensorFlow Serving runs it only behind
            `--xla_cpu_compilation_enabled`. XLA keeps shapes fixed, so
            greedy halves its batch as rows end (`drop_finished="halves"`)
            instead of dropping each ended row, and the encoder runs on the
            rows inside their length, halved likewise
            (`keras_attn.bidirectional_by_length`).
        shards: The batch is decoded as this many independent searches,
            which TensorFlow runs at the same time. Same headlines; it gains
            where one search leaves a core idle (under XLA, and for beam
            search).
        n_best: If > 0, the export has an `n_best` signature, the `n_best`
            best beams of each document (without XLA), which a student's
            `train.py --distill-from` reads (`--distill-targets inter`).
            None: 5, or `beam_size` if smaller; 1 beam: none.
        greedy_end_penalty: Greedy search only (the `greedy` signature;
            every signature when `beam_size` is 1): subtracted from the end
            token's log-probability at every step, so that its headlines
            run longer (`keras_attn.EndPenalty`; 0: off), and from their
            scores. Greedy search has no length penalty; this is its length
            lever, chosen on validation after the beam's settings.
    """

    beam_size: int = 5
    length_penalty: float = 1.0
    min_length: int = 3
    max_length: int = dataclasses.field(default=20, metadata={"default": None})
    no_repeat_ngram_size: int = 3
    suppress_unk: bool = False
    shortlist: int = 0
    xla: bool = False
    shards: int = 1
    n_best: int | None = None
    greedy_end_penalty: float = 0.0

    def __post_init__(self):
        if self.shards < 1:
            raise UserError(f"`shards` must be >= 1. Received: shards={self.shards}")
        if self.n_best is None:
            self.n_best = 0 if self.xla else min(5, self.beam_size)
        if self.beam_size < 2:
            self.n_best = 0  # greedy search has no beams to list
        if not 0 <= self.n_best <= self.beam_size:
            raise UserError(
                f"`n_best` must be in [0, beam_size={self.beam_size}]. "
                f"Received: n_best={self.n_best}"
            )

    @classmethod
    def tuned(cls, run_dir):
        """The settings a run chose on validation, else the defaults."""
        path = Path(run_dir) / SEARCH_TUNING_FILE
        return cls(**json.loads(path.read_text())["chosen"]) if path.exists() else cls()
