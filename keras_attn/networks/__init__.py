"""Pointer Networks and Recurrent Entity Networks."""

from keras_attn.networks.entity_network import (
    EntityMemoryCell,
    EntityOutput,
    PositionEncoder,
)
from keras_attn.networks.pointer_network import (
    PointerNetwork,
    pointer_network_log_probs,
    pointer_network_nll,
)

__all__ = [
    "EntityMemoryCell",
    "EntityOutput",
    "PointerNetwork",
    "PositionEncoder",
    "pointer_network_log_probs",
    "pointer_network_nll",
]
