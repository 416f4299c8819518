"""Greedy, beam and sampling search over any one-token step, and the
processors that constrain it (`keras_attn.search.strategies` says what a
step is and what the searches return)."""

from keras_attn.search.buffers import writes_by_select
from keras_attn.search.loop import BeamHistory, DecodingResult, tile_batch
from keras_attn.search.processors import (
    BannedIds,
    EndPenalty,
    IdBan,
    IdShift,
    LogitsProcessor,
    MaxLength,
    MinLength,
    NoRepeatNgram,
    TokenBan,
)
from keras_attn.search.strategies import beam_search, greedy_search, sampling_search
from keras_attn.search.warpers import LogitsWarper, Temperature, TopK, TopP

__all__ = [
    "BannedIds",
    "BeamHistory",
    "DecodingResult",
    "EndPenalty",
    "IdBan",
    "IdShift",
    "LogitsProcessor",
    "LogitsWarper",
    "MaxLength",
    "MinLength",
    "NoRepeatNgram",
    "Temperature",
    "TokenBan",
    "TopK",
    "TopP",
    "beam_search",
    "greedy_search",
    "sampling_search",
    "tile_batch",
    "writes_by_select",
]
