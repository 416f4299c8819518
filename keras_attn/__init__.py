"""keras-attn: attention layers for Keras 3, on every backend.

The top-level names are what a model is written with. The types the layers
and the search return (`keras_attn.base.AttentionMemory`,
`keras_attn.search.DecodingResult`) and the bases for writing a processor of
one's own (`keras_attn.processors.TokenBan`, `IdBan`, `IdShift`) are
imported from their modules.
"""

from keras_attn.additive import BahdanauAttention, ConcatAttention
from keras_attn.base import BaseAttention
from keras_attn.candidates import Candidates, draw_candidates
from keras_attn.coverage import CoverageAttention, coverage_loss
from keras_attn.dot import DotAttention, ScaledDotAttention
from keras_attn.entity_network import EntityMemoryCell, EntityOutput, PositionEncoder
from keras_attn.general import GeneralAttention
from keras_attn.masking import causal_mask, masked_softmax
from keras_attn.minimum_risk import minimum_risk_loss
from keras_attn.network import NetworkAttention
from keras_attn.pointer import (
    PointerGenerator,
    copy_distribution,
    mix_target_probabilities,
    pointer_generator_distribution,
    pointer_generator_log_distribution,
    pointer_generator_nll,
    target_probabilities,
)
from keras_attn.pointer_network import (
    PointerNetwork,
    pointer_network_log_probs,
    pointer_network_nll,
)
from keras_attn.processors import (
    BannedIds,
    EndPenalty,
    LogitsProcessor,
    MaxLength,
    MinLength,
    NoRepeatNgram,
)
from keras_attn.recurrent import (
    AttentionCellWrapper,
    AttentionRNN,
    BahdanauAttentionCell,
    LuongAttentionCell,
    SelfAttentionCell,
)
from keras_attn.rnn_by_length import bidirectional_by_length
from keras_attn.rouge import rouge_cost, rouge_l, rouge_n
from keras_attn.search import (
    beam_search,
    greedy_search,
    sampling_search,
    tile_batch,
)
from keras_attn.shortlist import shortlist_log_distribution
from keras_attn.warpers import LogitsWarper, Temperature, TopK, TopP

__version__ = "0.1.0"

__all__ = [
    "AttentionCellWrapper",
    "AttentionRNN",
    "BahdanauAttention",
    "BahdanauAttentionCell",
    "BannedIds",
    "BaseAttention",
    "Candidates",
    "ConcatAttention",
    "CoverageAttention",
    "DotAttention",
    "EndPenalty",
    "EntityMemoryCell",
    "EntityOutput",
    "GeneralAttention",
    "LogitsProcessor",
    "LogitsWarper",
    "LuongAttentionCell",
    "MaxLength",
    "MinLength",
    "NetworkAttention",
    "NoRepeatNgram",
    "PointerGenerator",
    "PointerNetwork",
    "PositionEncoder",
    "ScaledDotAttention",
    "SelfAttentionCell",
    "Temperature",
    "TopK",
    "TopP",
    "beam_search",
    "bidirectional_by_length",
    "causal_mask",
    "copy_distribution",
    "coverage_loss",
    "draw_candidates",
    "greedy_search",
    "masked_softmax",
    "minimum_risk_loss",
    "mix_target_probabilities",
    "pointer_generator_distribution",
    "pointer_generator_log_distribution",
    "pointer_generator_nll",
    "pointer_network_log_probs",
    "pointer_network_nll",
    "rouge_cost",
    "rouge_l",
    "rouge_n",
    "sampling_search",
    "shortlist_log_distribution",
    "target_probabilities",
    "tile_batch",
]
