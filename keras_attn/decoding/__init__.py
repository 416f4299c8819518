"""Decoding with a model: `AttentionDecoder` (teacher-forced logits and
`generate`; its outputs before the output layer, `DecoderOutputs`),
`Seq2SeqModel` (`generate(source)`), and the compiled search
they share."""

from keras_attn.decoding.decoder import AttentionDecoder, DecoderOutputs
from keras_attn.decoding.seq2seq import Seq2SeqModel

__all__ = ["AttentionDecoder", "DecoderOutputs", "Seq2SeqModel"]
