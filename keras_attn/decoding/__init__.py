"""Decoding with a model: `AttentionDecoder` (teacher-forced logits and
`generate`), `Seq2SeqModel` (`generate(source)`), and the compiled search
they share."""

from keras_attn.decoding.decoder import AttentionDecoder
from keras_attn.decoding.seq2seq import Seq2SeqModel

__all__ = ["AttentionDecoder", "Seq2SeqModel"]
