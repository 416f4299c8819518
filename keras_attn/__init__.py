"""keras-attn: attention layers for Keras 3, on every backend."""

from keras_attn.additive import BahdanauAttention, ConcatAttention
from keras_attn.base import AttentionMemory, BaseAttention
from keras_attn.dot import DotAttention, ScaledDotAttention
from keras_attn.general import BilinearAttention, GeneralAttention
from keras_attn.masking import causal_mask, masked_softmax
from keras_attn.network import NetworkAttention

__version__ = "0.1.0"

__all__ = [
    "AttentionMemory",
    "BahdanauAttention",
    "BaseAttention",
    "BilinearAttention",
    "ConcatAttention",
    "DotAttention",
    "GeneralAttention",
    "NetworkAttention",
    "ScaledDotAttention",
    "causal_mask",
    "masked_softmax",
]
