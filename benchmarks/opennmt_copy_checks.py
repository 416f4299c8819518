"""Checks of OpenNMT-py 3.5.1's copy attention, run in the peer's venv.

Each check builds OpenNMT-py's own modules at a toy size (random weights)
and runs the code path of one of its copy-attention bugs, so that it fails on
OpenNMT-py 3.5.1 as released and passes once `peer_patches/` is applied:

* `copy_distributions`: the training loss's distributions
  (`LossCompute._compute_copy_loss` over an `InputFeedRNNDecoder`'s outputs
  and copy attention) sum to 1 in every row;
* `own_source_vocabulary`: after the beam dropped a finished sentence,
  `Translator._decode_and_generate` moves the copy probability of the
  remaining sentence's source word to that word's target id, not to the
  word of the sentence that was dropped;
* `replace_unk_on_rnn`: `BeamSearch` takes an RNN decoder's attention
  (`-replace_unk` returns it) for a few steps.

`peer_opennmt` runs `main()` with the venv's Python; this module imports
only torch and onmt, never the project.
"""

import json
import sys
import types

import torch

HIDDEN, SOURCE_LENGTH, VOCAB = 8, 5, 12
PAD, UNK = 1, 0


class Vocab:
    """What OpenNMT-py reads of a vocabulary: `len`, a token's id (UNK if
    absent) and `ids_to_tokens`."""

    def __init__(self, tokens):
        self.ids_to_tokens = list(tokens)

    def __len__(self):
        return len(self.ids_to_tokens)

    def __getitem__(self, token):
        tokens = self.ids_to_tokens
        return tokens.index(token) if token in tokens else UNK


def rnn_decoder(copy_attn):
    from onmt.decoders.decoder import InputFeedRNNDecoder
    from onmt.modules import Embeddings

    embeddings = Embeddings(HIDDEN, VOCAB, word_padding_idx=PAD)
    decoder = InputFeedRNNDecoder(
        "LSTM",
        bidirectional_encoder=False,
        num_layers=1,
        hidden_size=HIDDEN,
        attn_type="mlp",
        copy_attn=copy_attn,
        reuse_copy_attn=copy_attn,
        embeddings=embeddings,
    )
    # OpenNMT-py's model builder initializes the weights (`param_init` 0.1);
    # the modules alone may leave some uninitialized (its `Embeddings`).
    for parameter in decoder.parameters():
        torch.nn.init.uniform_(parameter, -0.1, 0.1)
    return decoder


def start_decoder(decoder, batch):
    """`enc_out (batch, SOURCE_LENGTH, HIDDEN)`, the decoder's state set."""
    enc_out = torch.randn(batch, SOURCE_LENGTH, HIDDEN)
    final = (torch.randn(1, batch, HIDDEN), torch.randn(1, batch, HIDDEN))
    decoder.init_state(None, enc_out, final)
    return enc_out


def one_hot_src_map(batch, extra):
    """`(batch, SOURCE_LENGTH, extra)`: source position i is extra word
    `i % extra`."""
    positions = torch.arange(SOURCE_LENGTH) % extra
    return torch.nn.functional.one_hot(positions, extra).float().repeat(batch, 1, 1)


def copy_distributions(batch=3, steps=4, extra=3):
    """The rows' sums of the training loss's copy distributions."""
    from onmt.modules.copy_generator import CopyGenerator, CopyGeneratorLoss
    from onmt.utils.loss import LossCompute

    torch.manual_seed(0)
    decoder = rnn_decoder(copy_attn=True)
    generator = CopyGenerator(HIDDEN, VOCAB, PAD)
    with torch.no_grad():  # copy gates far apart, so that a mix-up shows
        generator.linear_copy.weight.mul_(20.0)
    enc_out = start_decoder(decoder, batch)
    tgt = torch.randint(2, VOCAB, (batch, steps, 1))
    src_len = torch.full((batch,), SOURCE_LENGTH)
    with torch.no_grad():
        output, attns = decoder(tgt, enc_out, src_len=src_len)
        loss = LossCompute(
            CopyGeneratorLoss(VOCAB, False, UNK, PAD), generator, copy_attn=True
        )
        flat = tgt[:, :, 0].reshape(-1)
        batch_dict = {"src_map": one_hot_src_map(batch, extra)}
        align = torch.randint(0, extra, flat.shape)
        _, scores = loss._compute_copy_loss(batch_dict, output, flat, align, attns)
    sums = scores.sum(1)
    return {
        "passed": bool(torch.allclose(sums, torch.ones_like(sums), atol=1e-5)),
        "row_sums_min": round(sums.min().item(), 4),
        "row_sums_max": round(sums.max().item(), 4),
    }


def own_source_vocabulary():
    """After sentence 0 of 2 ended, sentence 1's copied word's target id."""
    from onmt.modules.copy_generator import CopyGenerator
    from onmt.translate.translator import Translator

    torch.manual_seed(0)
    target_words = ["<unk>", "<blank>", "<s>", "</s>", "alpha", "beta"]
    tgt_vocab = Vocab(target_words + [f"w{i}" for i in range(VOCAB - 6)])
    alpha, beta = tgt_vocab["alpha"], tgt_vocab["beta"]
    generator = CopyGenerator(HIDDEN, VOCAB, PAD)
    dec_out = torch.randn(1, 1, HIDDEN)
    attn = torch.softmax(torch.randn(1, 1, SOURCE_LENGTH), -1)

    def decoder(decoder_in, enc_out, **kwargs):
        return dec_out, {"copy": attn, "std": attn}

    translator = types.SimpleNamespace(
        model=types.SimpleNamespace(decoder=decoder, generator=generator),
        copy_attn=True,
        beam_size=1,
        _tgt_vocab=tgt_vocab,
        _tgt_vocab_len=len(tgt_vocab),
        _tgt_unk_idx=UNK,
        global_scorer=types.SimpleNamespace(has_cov_pen=False),
    )
    batch = {
        "src_ex_vocab": [Vocab(["<unk>", "alpha"]), Vocab(["<unk>", "beta"])],
        "srclen": torch.full((2,), SOURCE_LENGTH),
    }
    # The remaining row is sentence 1: every source position is its "beta".
    src_map = torch.zeros(1, SOURCE_LENGTH, 2)
    src_map[:, :, 1] = 1.0
    with torch.no_grad():
        raw = generator(dec_out.view(1, -1), attn.view(1, -1), src_map)[0]
        log_probs, _ = Translator._decode_and_generate(
            translator,
            torch.full((1, 1, 1), 2),
            None,
            batch,
            src_len=batch["srclen"][1:],
            src_map=src_map,
            step=0,
            batch_offset=torch.tensor([1]),
        )
    probs = log_probs.exp().view(-1)
    copied = raw[VOCAB + 1].item()
    return {
        "passed": bool(
            abs(probs[beta].item() - raw[beta].item() - copied) < 1e-5
            and abs(probs[alpha].item() - raw[alpha].item()) < 1e-5
        ),
        "copy_probability": round(copied, 4),
        "gained_by_own_word": round(probs[beta].item() - raw[beta].item(), 4),
        "gained_by_dropped_sentences_word": round(
            probs[alpha].item() - raw[alpha].item(), 4
        ),
    }


def replace_unk_on_rnn(batch=2, beam_size=2, steps=3):
    """`BeamSearch` advanced with an RNN decoder's attention, as the
    translator's loop does with `-replace_unk`."""
    from onmt.translate import GNMTGlobalScorer
    from onmt.translate.beam_search import BeamSearch
    from onmt.translate.translator import Translator

    torch.manual_seed(0)
    decoder = rnn_decoder(copy_attn=False)
    generator = torch.nn.Linear(HIDDEN, VOCAB)
    with torch.no_grad():  # no hypothesis ends: every step advances them all
        generator.bias[3] = -1e4
    translator = types.SimpleNamespace(
        model=types.SimpleNamespace(decoder=decoder, generator=generator),
        copy_attn=False,
        global_scorer=GNMTGlobalScorer(0.0, 0.0, "none", "none"),
    )
    beam = BeamSearch(
        beam_size, batch, PAD, 2, 3, UNK, 2, 1, translator.global_scorer,
        0, steps + 1, True, 0, set(), False, 0.0, False,
    )  # fmt: skip
    enc_out = start_decoder(decoder, batch)
    src_len = torch.full((batch,), SOURCE_LENGTH)
    try:
        with torch.no_grad():
            fn_map_state, enc_out, _ = beam.initialize(enc_out, src_len)
            decoder.map_state(fn_map_state)
            for step in range(steps):
                log_probs, attn = Translator._decode_and_generate(
                    translator,
                    beam.current_predictions.view(-1, 1, 1),
                    enc_out,
                    None,
                    src_len=beam.src_len,
                    step=step,
                    batch_offset=beam.batch_offset,
                    return_attn=True,
                )
                beam.advance(log_probs, attn)
                select = beam.select_indices
                decoder.map_state(lambda state, dim, select=select: state[select])
    except (IndexError, RuntimeError) as error:
        return {"passed": False, "error": f"{type(error).__name__}: {error}"[:200]}
    shape = list(beam.alive_attn.shape)
    return {
        "passed": shape == [batch * beam_size, steps, SOURCE_LENGTH],
        "alive_attn": shape,
    }


CHECKS = {
    "copy_distributions": copy_distributions,
    "own_source_vocabulary": own_source_vocabulary,
    "replace_unk_on_rnn": replace_unk_on_rnn,
}


def main():
    """Prints `{check: result}` as JSON; a check that raises has failed."""
    results = {}
    for name, check in CHECKS.items():
        try:
            results[name] = check()
        except Exception as error:  # noqa: BLE001 (a crash is a failed check)
            results[name] = {
                "passed": False,
                "error": f"{type(error).__name__}: {error}"[:200],
            }
    json.dump(results, sys.stdout)
    print()
