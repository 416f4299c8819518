"""`generate`'s beam search against keras-hub's `BeamSampler` on one model.

The reverse toy of benchmarks/toy_reverse.py, trained for `--steps`
batches, decodes `--batch` fresh sources with beam `--beam-size`, both
searches under `jax.jit` on JAX:

* keras-hub: `keras_hub.samplers.BeamSampler(num_beams)` over a `next`
  that runs `AttentionDecoder.step` on the prompt's previous token, the
  decoder's states (the prepared memory among them) as its cache;
* keras-attn: `Seq2SeqModel.generate(source, strategy="beam")`, no length
  penalty.

Two settings. Without an end token (its logit set to -1e9 in both, no stop
token in keras-hub's) both run every step and rank by the summed
log-probability alone, so their ids must be the same. With the end token
(keras-hub's `stop_token_ids`), keras-hub keeps extending a beam that has
ended and adds those tokens' log-probabilities to its score, while ours
freezes an ended hypothesis: the share of sources whose headlines (up to
the end token) agree is reported beside the time. Without the end token,
`keras_attn_no_less_likely` is the share of sources whose keras-attn
hypothesis the model finds at least as likely as keras-hub's (both scored
again token by token), where their ids differ or not.

Needs keras-hub (not a dependency of this project) beside JAX:

```
pip install --no-deps keras-hub && pip install absl-py rich regex kagglehub tokenizers
KERAS_BACKEND=jax python -m benchmarks.bench_keras_hub_beam
```
"""

import argparse
import json
import statistics
import time

import jax
import keras
import numpy as np
from keras import ops
from keras_hub.samplers import BeamSampler

import keras_attn as ka
from benchmarks import toy_reverse as toy


def keras_hub_search(model, num_beams, max_length, stop):
    """`fn(source) -> (ids (batch, max_length), log_probs (batch,))` of the
    best beam with keras-hub's sampler, jitted (the trained weights baked in)."""
    decoder = model.decoder
    sampler = BeamSampler(num_beams=num_beams, return_all_beams=True)

    def next_token(prompt, cache, index):
        logits, cache = decoder.step(prompt[:, index - 1], list(cache))
        if not stop:  # the end token banned, as `end_banned` bans it in ours
            logits = ban_end(logits)
        return logits, None, tuple(cache)

    def search(source):
        memory, mask, states = model.encode(source)
        cache = tuple(decoder.initial_search_state(memory, mask, states))
        prompt = ops.concatenate(
            [
                ops.full((ops.shape(source)[0], 1), toy.START, "int32"),
                ops.zeros((ops.shape(source)[0], max_length), "int32"),
            ],
            axis=1,
        )
        beams, log_probs = sampler(
            next_token,
            prompt,
            cache=cache,
            index=1,
            stop_token_ids=[toy.END] if stop else None,
        )
        return beams[:, 0, 1:], log_probs[:, 0]

    return jax.jit(search)


def summed_log_prob(model, source, ids, banned):
    """The model's summed log-probability of each row of `ids`, scored token
    by token (the end id's logit set aside where the search banned it)."""
    decoder = model.decoder
    memory, mask, states = model.encode(source)
    states = decoder.initial_search_state(memory, mask, states)
    previous = ops.full((ops.shape(source)[0],), toy.START, "int32")
    total = np.zeros(len(ids), "float64")
    for t in range(ids.shape[1]):
        logits, states = decoder.step(previous, states)
        if banned:
            logits = ban_end(logits)
        log_probs = ops.convert_to_numpy(ops.log_softmax(logits))
        total += log_probs[np.arange(len(ids)), ids[:, t]]
        previous = ops.convert_to_tensor(ids[:, t], "int32")
    return total


def until_end(ids):
    """Each row's tokens up to its first end token, as a tuple."""
    rows = []
    for row in np.asarray(ids):
        ends = np.flatnonzero(row == toy.END)
        rows.append(tuple(row[: ends[0]] if len(ends) else row))
    return rows


def interleaved(fns, repeats):
    """Each of `fns`' first call (s), then the median of `repeats` later
    calls taken in turns, so that both see the same load."""
    firsts = []
    for fn in fns:
        start = time.perf_counter()
        fn()
        firsts.append(time.perf_counter() - start)
    later = [[] for _ in fns]
    for _ in range(repeats):
        for fn, times in zip(fns, later, strict=True):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return firsts, [statistics.median(times) for times in later]


def ban_end(logits):
    """The end token's logit set to -1e9 (the softmax renormalizes the rest)."""
    return ops.where(ops.arange(toy.VOCAB) == toy.END, -1e9, logits)


class EndBanned(keras.layers.Layer):
    """A trained output layer whose end token's logit is banned."""

    def __init__(self, output_layer, **kwargs):
        super().__init__(**kwargs)
        self.output_layer = output_layer

    def call(self, inputs):
        return ban_end(self.output_layer(inputs))


def end_banned(model):
    """`model` with the same layers, whose output layer bans the end token."""
    decoder = model.decoder
    banned = ka.AttentionDecoder(
        decoder.embedding, decoder.cell, EndBanned(decoder.output_layer)
    )
    return ka.Seq2SeqModel(model.encoder, banned, toy.START, toy.END, toy.PAD)


def compare(model, source, beam_size, repeats, stop):
    max_length = toy.LENGTH + 1
    theirs = keras_hub_search(model, beam_size, max_length, stop)
    searched = model if stop else end_banned(model)
    options = {"beam_size": beam_size, "length_penalty": 0.0}

    def ours():
        return searched.generate(
            source, max_length=max_length, strategy="beam", **options
        )

    def keras_hub():
        return theirs(ops.convert_to_tensor(source))

    (ours_first, their_first), (ours_later, their_later) = interleaved(
        [lambda: np.asarray(ours().ids), lambda: np.asarray(keras_hub()[0])], repeats
    )
    ours_ids = np.asarray(ours().ids)
    their_ids = np.asarray(keras_hub()[0])
    if stop:
        pairs = zip(until_end(ours_ids), until_end(their_ids), strict=True)
        same = np.mean([a == b for a, b in pairs])
        no_worse = float("nan")  # keras-hub's hypotheses run on past their end
    else:
        same = np.mean(np.all(ours_ids == their_ids, axis=1))
        ours_score = summed_log_prob(model, source, ours_ids, banned=True)
        their_score = summed_log_prob(model, source, their_ids, banned=True)
        no_worse = np.mean(ours_score >= their_score - 1e-4)
    return {
        "end_token": stop,
        "same_ids": round(float(same), 4),
        "keras_attn_no_less_likely": round(float(no_worse), 4),
        "keras_attn_first_s": round(ours_first, 4),
        "keras_attn_later_s": round(ours_later, 5),
        "keras_hub_first_s": round(their_first, 4),
        "keras_hub_later_s": round(their_later, 5),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args(argv)
    if keras.backend.backend() != "jax":
        parser.error(f"runs on JAX. Received: KERAS_BACKEND={keras.backend.backend()}")
    model = toy.build_model()
    toy.train(model, args.steps)
    source = toy.reverse_task(args.batch, np.random.default_rng(5))[0]
    for stop in (False, True):
        row = compare(model, source, args.beam_size, args.repeats, stop)
        print(json.dumps({"batch": args.batch, "beam_size": args.beam_size, **row}))


if __name__ == "__main__":
    main()
