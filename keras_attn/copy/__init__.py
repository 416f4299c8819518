"""Coverage and copy: attention that remembers, distributions that copy."""

from keras_attn.copy.coverage import CoverageAttention, coverage_loss
from keras_attn.copy.distributions import (
    copy_distribution,
    mix_target_probabilities,
    pointer_generator_distribution,
    pointer_generator_log_distribution,
    pointer_generator_nll,
    target_probabilities,
)
from keras_attn.copy.pointer_generator import PointerGenerator
from keras_attn.copy.shortlist import shortlist_log_distribution

__all__ = [
    "CoverageAttention",
    "PointerGenerator",
    "copy_distribution",
    "coverage_loss",
    "mix_target_probabilities",
    "pointer_generator_distribution",
    "pointer_generator_log_distribution",
    "pointer_generator_nll",
    "shortlist_log_distribution",
    "target_probabilities",
]
