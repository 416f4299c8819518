"""keras-attn: attention layers for Keras 3, on every backend.

The top-level names are what a model is written with. The package's folders
follow its API groups: `keras_attn.layers` (the score functions),
`keras_attn.recurrent` (attention cells and RNNs), `keras_attn.decoding`
(a decoder composed once, and `generate`), `keras_attn.copy`
(coverage and copy), `keras_attn.search` (the searches and their
processors), `keras_attn.training` (sequence-level objectives),
`keras_attn.networks` (Pointer and Entity Networks). The types the layers
and the search return (`keras_attn.layers.AttentionMemory`,
`keras_attn.search.DecodingResult`) and the bases for writing a processor of
one's own (`keras_attn.search.TokenBan`, `IdBan`, `IdShift`) are imported
from their groups.
"""

from keras_attn.copy import (
    CoverageAttention,
    PointerGenerator,
    copy_distribution,
    coverage_loss,
    mix_target_probabilities,
    pointer_generator_distribution,
    pointer_generator_log_distribution,
    pointer_generator_nll,
    shortlist_log_distribution,
    target_probabilities,
)
from keras_attn.decoding import AttentionDecoder, DecoderOutputs, Seq2SeqModel
from keras_attn.layers import (
    BahdanauAttention,
    BaseAttention,
    ConcatAttention,
    DotAttention,
    GeneralAttention,
    NetworkAttention,
    ScaledDotAttention,
    causal_mask,
    masked_softmax,
)
from keras_attn.networks import (
    EntityMemoryCell,
    EntityOutput,
    PointerNetwork,
    PositionEncoder,
    pointer_network_log_probs,
    pointer_network_nll,
)
from keras_attn.recurrent import (
    AttentionCellWrapper,
    AttentionRNN,
    BahdanauAttentionCell,
    LuongAttentionCell,
    SelfAttentionCell,
    bidirectional_by_length,
)
from keras_attn.search import (
    BannedIds,
    EndPenalty,
    LogitsProcessor,
    LogitsWarper,
    MaxLength,
    MinLength,
    NoRepeatNgram,
    Temperature,
    TopK,
    TopP,
    beam_search,
    greedy_search,
    sampling_search,
    tile_batch,
)
from keras_attn.training import (
    Candidates,
    draw_candidates,
    minimum_risk_loss,
    rouge_cost,
    rouge_l,
    rouge_n,
)

__version__ = "0.2.0"

__all__ = [
    "AttentionCellWrapper",
    "AttentionDecoder",
    "DecoderOutputs",
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
    "Seq2SeqModel",
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
