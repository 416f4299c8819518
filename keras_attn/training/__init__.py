"""Sequence-level training: minimum risk, its candidates, ROUGE on ids."""

from keras_attn.training.candidates import Candidates, draw_candidates
from keras_attn.training.minimum_risk import minimum_risk_loss
from keras_attn.training.rouge import rouge_cost, rouge_l, rouge_n

__all__ = [
    "Candidates",
    "draw_candidates",
    "minimum_risk_loss",
    "rouge_cost",
    "rouge_l",
    "rouge_n",
]
