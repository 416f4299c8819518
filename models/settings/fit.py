"""How a model trains: `TrainOptions`, the command line's training flags.

Plain dataclass with no TensorFlow import, like the other settings.
"""

import dataclasses

from models.settings.errors import UserError, check_at_least
from models.settings.flags import choices

MIXED_PRECISION_CHOICES = ("mixed_float16", "mixed_bfloat16")


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
        default=None, metadata=choices(MIXED_PRECISION_CHOICES)
    )
    seed: int = 0
    ensemble: int = 3

    def __post_init__(self):
        if not self.clipnorm > 0:
            raise UserError(
                f"`clipnorm` must be > 0. Received: clipnorm={self.clipnorm}"
            )
        if not 0 <= self.ema_momentum < 1:
            raise UserError(
                "`ema_momentum` must be in [0, 1). Received: "
                f"ema_momentum={self.ema_momentum}"
            )
        if not 0 < self.lr_decay <= 1:
            raise UserError(
                f"`lr_decay` must be in (0, 1]. Received: lr_decay={self.lr_decay}"
            )
        check_at_least(
            self,
            [
                # 0 trains nothing: a student that keeps its teacher's weights.
                ("learning_rate", 0),
                ("validate_every", 1),
                ("train_examples", 1),
                ("batch_size", 1),
                ("validation_loss_examples", 1),
                ("min_count", 1),
                ("patience", 0),
                ("min_train_examples", 0),
                ("validation_rouge_examples", 0),
                ("lr_decay_patience", 0),
                ("ensemble", 1),
            ],
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
