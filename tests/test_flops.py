"""The exact FLOP count behind the benchmarks' GFLOP/s, checked by hand."""

import pytest

from benchmarks import bench_paper_training, flops
from models.settings.model import SummarizerConfig


def config(**overrides):
    values = dict(
        vocab_size=10,
        embedding_dim=2,
        hidden_size=4,
        attention_units=3,
        sampled_softmax=0,
    )
    return SummarizerConfig(**{**values, **overrides})


def test_encoder_by_hand():
    # u = 2: per token 2 directions * 2 FLOPs * 4 gates * 2 * (2 + 2) = 128;
    # 5 tokens: 640. Bridge 2 * 4 * 4 = 32. Keys W1 k: 2 * 5 * 4 * 3 = 120.
    assert flops.encoder_flops(config(), 5) == 640 + 32 + 120


def test_stacked_encoder_by_hand():
    # A second layer takes the first's H = 4 outputs: per token
    # 2 * 2 * 4 * 2 * (4 + 2) = 192 more; 5 tokens: 960.
    assert flops.encoder_flops(config(encoder_layers=2), 5) == 640 + 960 + 32 + 120


def test_step_by_hand():
    # cell 2*4*4*(2+4) = 192; W2 q 2*4*3 = 24, v.tanh 2*5*3 = 30; context
    # 2*5*4 = 40; attentional 2*8*4 = 64; output tied 2*(4*2 + 2*10) = 56;
    # p_gen 2*(8+2) = 20.
    assert flops.step_flops(config(), 5) == 192 + 24 + 30 + 40 + 64 + 56 + 20
    # A shortlist of 3 words + the 5 source words: output 2*(4*2 + 2*8) = 48;
    # one of 6 (11 columns) is the whole vocabulary of 10.
    assert (
        flops.step_flops(config(), 5, shortlist=3) == 192 + 24 + 30 + 40 + 64 + 48 + 20
    )
    assert flops.step_flops(config(), 5, shortlist=6) == flops.step_flops(config(), 5)


def test_gru_untied_no_copy_dot():
    c = config(cell="gru", tie_embeddings=False, copy=False, attention="luong-dot")
    # cell 2*3*4*6 = 144; dot scores 2*5*4 = 40; context 40; attentional
    # 64; output 2*4*10 = 80.
    assert flops.step_flops(c, 5) == 144 + 40 + 40 + 64 + 80
    # GRU encoder: 2 * 2 * 3 * 2 * 4 = 96 a token; no key projection.
    assert flops.encoder_flops(c, 5) == 5 * 96 + 32


def test_search_sums_rows_and_beams():
    c = config()
    out = flops.search_flops(c, [5, 3], [2, 4], beam_size=3)
    encoder = flops.encoder_flops(c, 5) + flops.encoder_flops(c, 3)
    decoder = 3 * (2 * flops.step_flops(c, 5) + 4 * flops.step_flops(c, 3))
    assert out == {"encoder": encoder, "decoder": decoder, "total": encoder + decoder}
    with pytest.raises(ValueError, match="Received: len"):
        flops.search_flops(c, [5], [1, 2])


def test_training_step_by_hand():
    # Forward per row: encoder(5) = 792 and 3 target steps of 426 (above);
    # backpropagation doubles every product; 2 rows.
    assert flops.training_flops(config(), 2, 5, 3) == 3 * 2 * (792 + 3 * 426)
    # A sampled softmax of K = 4 scores 5 words a step: output
    # 2*(4*2 + 2*5) = 36 instead of 56.
    sampled = config(sampled_softmax=4)
    assert flops.training_flops(sampled, 1, 5, 3) == 3 * (792 + 3 * (426 - 56 + 36))
    # K at or above the vocabulary trains on the full softmax.
    assert flops.training_flops(config(sampled_softmax=10), 1, 5, 3) == 3 * (
        792 + 3 * 426
    )


def test_paper_training_flops_by_hand():
    # Per sentence and story 2*5*16 (U h) + 2*16 (W s) + 4*5*4 (gates) = 272,
    # times 2 stories x 3 sentences; V w_j 2*5*16 per sentence; the output
    # 4*5*4 + 2*16 + 2*4*7 = 168 per story; times 3 for the backward pass.
    assert bench_paper_training.entnet_step_flops(
        2, 3, dim=4, slots=5, vocab=7
    ) == 3 * (6 * 272 + 3 * 160 + 2 * 168)
    # Cell 2*4*4*(2+4) = 192; 3 encoder steps, 4 key projections of 2*16,
    # 4 decoder steps of 192 + 32 + 4*2*4, the one-hot table product 4*4*2*2.
    assert bench_paper_training.pointer_step_flops(2, 3, units=4) == 3 * 2 * (
        3 * 192 + 4 * 32 + 4 * 256 + 64
    )
