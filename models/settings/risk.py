"""How minimum-risk fine-tuning runs: `RiskOptions`.

Plain dataclass with no TensorFlow import, like the other settings.
"""

import dataclasses

from models.settings.errors import UserError, check_at_least
from models.settings.flags import choices

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
        risk_min_updates: Updates before early stopping may end the stage.
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
    risk_min_updates: int = 0
    risk_candidates: int = 8
    risk_method: str = dataclasses.field(
        default="beam", metadata=choices(RISK_METHOD_CHOICES)
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
        check_at_least(
            self,
            [
                ("risk_updates", 0),
                ("risk_validate_every", 1),
                ("risk_patience", 1),
                ("risk_min_updates", 0),
            ],
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
