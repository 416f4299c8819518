"""Recurrent attention: cells that attend at every step, and their RNNs."""

from keras_attn.recurrent.by_length import bidirectional_by_length
from keras_attn.recurrent.cells import (
    BahdanauAttentionCell,
    LuongAttentionCell,
    SelfAttentionCell,
)
from keras_attn.recurrent.rnn import AttentionRNN
from keras_attn.recurrent.wrapper import AttentionCellWrapper

__all__ = [
    "AttentionCellWrapper",
    "AttentionRNN",
    "BahdanauAttentionCell",
    "LuongAttentionCell",
    "SelfAttentionCell",
    "bidirectional_by_length",
]
