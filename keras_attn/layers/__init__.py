"""Attention layers: the score functions, their masks, the prepared memory."""

from keras_attn.layers.additive import BahdanauAttention, ConcatAttention
from keras_attn.layers.base import AttentionMemory, BaseAttention
from keras_attn.layers.dot import DotAttention, ScaledDotAttention
from keras_attn.layers.general import GeneralAttention
from keras_attn.layers.masking import causal_mask, masked_softmax
from keras_attn.layers.network import NetworkAttention

__all__ = [
    "AttentionMemory",
    "BahdanauAttention",
    "BaseAttention",
    "ConcatAttention",
    "DotAttention",
    "GeneralAttention",
    "NetworkAttention",
    "ScaledDotAttention",
    "causal_mask",
    "masked_softmax",
]
