"""keras_attn.search and keras_attn.processors, on every backend.

The toy model's log-probs depend on the last two tokens and a hash of the
whole prefix, so a search that fails to reorder its state decodes wrong; its
extras `[prev2, prev1, hash % 13, step]` identify the hypothesis and step.
Beam search is checked against a brute-force enumeration of every sequence.
"""

import importlib.util
import itertools
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from keras import ops

import keras_attn as ka

BACKEND = keras.backend.backend()
V, END = 5, 1
HASH_MOD, HASH_ROWS = 9973, 13
# The dropping modes each backend runs: JAX's loops keep fixed shapes.
_DROPS = {"tensorflow": [True, "halves"], "torch": [True, "halves"], "jax": ["halves"]}


def make_tables(seed=0, vocab=V):
    rng = np.random.default_rng(seed)
    bigram = rng.normal(0.0, 2.0, (vocab, vocab, vocab)).astype("float32")
    by_prefix = rng.normal(0.0, 1.0, (HASH_ROWS, vocab)).astype("float32")
    return bigram, by_prefix


def make_step(bigram, by_prefix, extras=True):
    """`step(ids, state)` of the toy model (see the module docstring)."""

    def step(ids, state):
        vocab = ops.shape(bigram)[-1]
        prev2, prefix_hash, t = state["prev2"], state["hash"], state["t"]
        new_hash = (prefix_hash * 7 + ids + 1) % HASH_MOD
        flat = ops.reshape(bigram, (-1, vocab))
        logits = ops.take(flat, prev2 * vocab + ids, axis=0) + ops.take(
            by_prefix, new_hash % HASH_ROWS, axis=0
        )
        new_state = {"prev2": ids, "hash": new_hash, "t": t + 1}
        log_probs = ops.log_softmax(logits, axis=-1)
        if not extras:
            return log_probs, new_state
        record = ops.cast(
            ops.stack([prev2, ids, new_hash % HASH_ROWS, t], -1), "float32"
        )
        return log_probs, new_state, record

    return step


def initial_state(start_ids):
    start_ids = ops.convert_to_tensor(start_ids, "int32")
    zeros = ops.zeros_like(start_ids)
    return {"prev2": start_ids, "hash": zeros, "t": zeros}


def np_step(bigram, by_prefix, prev2, prev1, prefix_hash):
    new_hash = (prefix_hash * 7 + prev1 + 1) % HASH_MOD
    logits = (bigram[prev2, prev1] + by_prefix[new_hash % HASH_ROWS]).astype("float64")
    logits = logits - logits.max()
    return logits - np.log(np.exp(logits).sum()), new_hash


def has_repeated_ngram(tokens, n):
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return len(grams) != len(set(grams))


def brute_force(tables, start, max_length, min_length=0, banned=(), ngram=0, alpha=0.0):
    """Best `(tokens, log_prob, score)` over every admissible sequence."""
    ranked = ranked_sequences(
        tables, start, max_length, min_length, banned, ngram, alpha
    )
    return ranked[0]


def ranked_sequences(
    tables, start, max_length, min_length=0, banned=(), ngram=0, alpha=0.0
):
    """Every admissible `(tokens, log_prob, score)`, the best first."""
    bigram, by_prefix = tables
    every = []
    for length in range(1, max_length + 1):
        for seq in itertools.product(range(bigram.shape[-1]), repeat=length):
            ended = seq[-1] == END
            if END in seq[:-1] or (length < max_length and not ended):
                continue
            if any(t in banned for t in seq) or (ended and length - 1 < min_length):
                continue
            if ngram and has_repeated_ngram(seq, ngram):
                continue
            prev2, prev1, h, total = start, start, 0, 0.0
            for token in seq:
                log_probs, h = np_step(bigram, by_prefix, prev2, prev1, h)
                total += log_probs[token]
                prev2, prev1 = prev1, token
            score = total / ((5.0 + length) / 6.0) ** alpha
            every.append((list(seq), total, score))
    return sorted(every, key=lambda x: -x[2])


def np_result(result):
    return ka.DecodingResult(
        *(None if x is None else ops.convert_to_numpy(x) for x in result)
    )


def unpad(result, b):
    """Tokens of example `b` up to and including the end token."""
    length = int(result.lengths[b])
    ids = result.ids[b]
    return list(ids[: length + 1]) if length < ids.shape[0] else list(ids)


def check_extras(result, starts):
    """The extras rows describe the chosen hypothesis, then zeros."""
    for b, start in enumerate(starts):
        seq = [start, start] + list(result.ids[b])
        h = 0
        for t in range(result.ids.shape[1]):
            h = (h * 7 + seq[t + 1] + 1) % HASH_MOD
            expected = [seq[t], seq[t + 1], h % HASH_ROWS, t]
            if t >= result.lengths[b]:
                expected = [0, 0, 0, 0]
            np.testing.assert_allclose(
                result.extras[b, t], expected, err_msg=f"{b},{t}"
            )


STARTS = [0, 2, 3, 4]
MAX_LEN = 4
# Every admissible hypothesis fits: 4**3 + 4**2 + 4 + 1 ended + 4**4 open.
EXHAUSTIVE_BEAM = 350


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"alpha": 0.8},
        {"min_length": 2, "banned": (3,), "ngram": 1, "alpha": -0.5},
        {"ngram": 2, "min_length": 1, "alpha": 1.0},
    ],
    ids=["plain", "penalty", "min_banned_unigram", "bigram"],
)
def test_exhaustive_beam_equals_brute_force(options):
    tables = make_tables(seed=3)
    alpha = options.get("alpha", 0.0)
    result = np_result(
        ka.beam_search(
            make_step(*tables),
            initial_state(STARTS),
            STARTS,
            END,
            MAX_LEN,
            EXHAUSTIVE_BEAM,
            length_penalty=alpha,
            min_length=options.get("min_length", 0),
            banned_ids=options.get("banned", ()),
            no_repeat_ngram_size=options.get("ngram", 0),
        )
    )
    for b, start in enumerate(STARTS):
        tokens, log_prob, score = brute_force(
            tables,
            start,
            MAX_LEN,
            min_length=options.get("min_length", 0),
            banned=options.get("banned", ()),
            ngram=options.get("ngram", 0),
            alpha=alpha,
        )
        assert unpad(result, b) == tokens
        np.testing.assert_allclose(result.log_probs[b], log_prob, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(result.scores[b], score, rtol=1e-5, atol=1e-5)
    check_extras(result, STARTS)


def test_exhaustive_beam_returns_the_n_best_in_order():
    """`num_hypotheses=3`: the three best sequences of the brute force, best
    first, each with its extras (rows `b * 3 + i`)."""
    tables = make_tables(seed=3)
    result = np_result(
        ka.beam_search(
            make_step(*tables),
            initial_state(STARTS),
            STARTS,
            END,
            MAX_LEN,
            EXHAUSTIVE_BEAM,
            length_penalty=1.0,
            num_hypotheses=3,
        )
    )
    assert result.ids.shape == (3 * len(STARTS), MAX_LEN)
    for b, start in enumerate(STARTS):
        ranked = ranked_sequences(tables, start, MAX_LEN, alpha=1.0)
        assert ranked[2][2] > ranked[3][2] + 1e-4  # no tie at the cut
        for i, (tokens, log_prob, score) in enumerate(ranked[:3]):
            row = b * 3 + i
            assert unpad(result, row) == tokens
            np.testing.assert_allclose(result.log_probs[row], log_prob, rtol=1e-5)
            np.testing.assert_allclose(result.scores[row], score, rtol=1e-5)
    check_extras(result, [s for s in STARTS for _ in range(3)])


def test_num_hypotheses_must_fit_the_beam():
    with pytest.raises(ValueError, match=r"num_hypotheses=4"):
        ka.beam_search(
            make_step(*make_tables(seed=3)), None, STARTS, END, MAX_LEN, 3,
            num_hypotheses=4,
        )  # fmt: skip


def greedy_path(tables, start, max_length):
    """The argmax path, in numpy."""
    bigram, by_prefix = tables
    prev2, prev1, h, tokens, total = start, start, 0, [], 0.0
    for _ in range(max_length):
        log_probs, h = np_step(bigram, by_prefix, prev2, prev1, h)
        token = int(np.argmax(log_probs))
        tokens.append(token)
        total += log_probs[token]
        if token == END:
            break
        prev2, prev1 = prev1, token
    return tokens, total


def test_greedy_equals_argmax_path():
    tables = make_tables(seed=5)
    result = np_result(
        ka.greedy_search(make_step(*tables), initial_state(STARTS), STARTS, END, 6)
    )
    assert result.ids.shape == (len(STARTS), 6)
    for b, start in enumerate(STARTS):
        tokens, total = greedy_path(tables, start, 6)
        assert unpad(result, b) == tokens
        np.testing.assert_allclose(result.log_probs[b], total, rtol=1e-5)
    np.testing.assert_array_equal(result.scores, result.log_probs)
    check_extras(result, STARTS)


@pytest.mark.parametrize("drop_finished", [False, *_DROPS[BACKEND]])
def test_greedy_takes_the_first_of_tied_tokens(drop_finished):
    # Row 0: tokens 2 and 3 tie, then the end; row 1: everything ties, so
    # token 0; row 2: every token banned (-inf), token 0 again (at -inf,
    # where the search's docstring says it may go on).
    table = np.log(
        np.array([[0.1, 0.1, 0.4, 0.4, 0.0], [0.2] * 5, [0.0] * 5], "float32").clip(
            1e-30
        )
    )
    table[2] = -np.inf

    def step(ids, state):
        # The dropping modes pass a row's state with it: `row` says which.
        first = ops.take(ops.convert_to_tensor(table), state["row"], axis=0)
        end_next = ops.where(ops.arange(V) == END, 0.0, -np.inf)[None]
        is_first = ops.expand_dims(state["t"] == 0, 1)
        return ops.where(is_first, first, end_next), dict(state, t=state["t"] + 1)

    result = np_result(
        ka.greedy_search(
            step,
            {"t": ops.zeros((3,), "int32"), "row": ops.arange(3, dtype="int32")},
            ops.zeros((3,), "int32"),
            END,
            3,
            drop_finished=drop_finished,
        )
    )
    np.testing.assert_array_equal(result.ids[:, 0], [2, 0, 0])
    np.testing.assert_array_equal(result.lengths[:2], [1, 1])


@pytest.mark.parametrize("seed", [0, 5, 9])
def test_no_search_beats_the_exhaustive_beam(seed):
    # "Beam >= greedy" holds only for some inputs; what always holds is that
    # no search ends above the optimum, which the exhaustive beam finds.
    tables = make_tables(seed=seed)
    args = (initial_state(STARTS), STARTS, END, MAX_LEN)
    greedy = np_result(ka.greedy_search(make_step(*tables), *args))
    small, exhaustive = (
        np_result(ka.beam_search(make_step(*tables), *args, size))
        for size in (3, EXHAUSTIVE_BEAM)
    )
    best = exhaustive.log_probs
    for b, start in enumerate(STARTS):
        assert best[b] == pytest.approx(
            brute_force(tables, start, MAX_LEN)[1], abs=1e-4
        )
    assert np.all(greedy.log_probs <= best + 1e-5)
    assert np.all(small.log_probs <= best + 1e-5)
    check_extras(small, STARTS)


@pytest.mark.parametrize(
    "options",
    [{}, {"min_length": 3, "banned_ids": [0, 4], "no_repeat_ngram_size": 2}],
    ids=["plain", "constrained"],
)
def test_beam_size_one_equals_greedy(options):
    tables = make_tables(seed=7)
    args = (initial_state(STARTS), STARTS, END, 8)
    greedy = np_result(ka.greedy_search(make_step(*tables), *args, **options))
    beam = np_result(ka.beam_search(make_step(*tables), *args, 1, **options))
    for field in ka.DecodingResult._fields:
        np.testing.assert_allclose(
            getattr(beam, field), getattr(greedy, field), rtol=1e-6, err_msg=field
        )


def looping_step(vocab=6, boost=8.0, end_logit=-10.0):
    """Strongly prefers the cycle 2 -> 3 -> 2 -> ..., almost never ends."""
    logits = np.zeros((vocab, vocab), "float32")
    for a, b in [(0, 2), (2, 3), (3, 2), (4, 2), (5, 3)]:
        logits[a, b] = boost
    logits[:, END] = end_logit

    def step(ids, state):
        return ops.log_softmax(ops.take(logits, ids, axis=0), axis=-1), state

    return step


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("beam_size", [1, 4])
def test_no_repeated_ngrams(n, beam_size):
    starts = [0, 4, 5]
    # n=1 allows only 5 distinct non-end tokens: end must be allowed by then.
    min_length = 4 if n == 1 else 6
    kwargs = dict(min_length=min_length, no_repeat_ngram_size=n)
    if beam_size == 1:
        result = ka.greedy_search(looping_step(), None, starts, END, 9, **kwargs)
    else:
        result = ka.beam_search(looping_step(), None, starts, END, 9, 4, **kwargs)
    result = np_result(result)
    assert result.extras is None
    for b in range(len(starts)):
        tokens = unpad(result, b)
        assert not has_repeated_ngram(tokens, n), tokens
        assert result.lengths[b] >= min_length
        assert np.isfinite(result.log_probs[b])
    # Without blocking the cycle repeats.
    free = np_result(ka.greedy_search(looping_step(), None, starts, END, 9))
    assert unpad(free, 0) == [2, 3] * 4 + [2]


def test_unigram_blocking_is_a_permutation():
    # A pointer network's tour: 5 positions, each exactly once, then the end.
    step = looping_step()
    result = np_result(
        ka.greedy_search(step, None, [0], END, 6, min_length=5, no_repeat_ngram_size=1)
    )
    tokens = unpad(result, 0)
    assert sorted(tokens[:5]) == [0, 2, 3, 4, 5] and tokens[5] == END


@pytest.mark.parametrize("beam_size", [1, 3])
def test_min_length_and_banned_ids(beam_size):
    # End is by far the likeliest token, and 2 the likeliest after it.
    logits = np.zeros((V, V), "float32")
    logits[:, END] = 10.0
    logits[:, 2] = 5.0

    def step(ids, state):
        return ops.log_softmax(ops.take(logits, ids, axis=0), axis=-1), state

    kwargs = dict(min_length=3, banned_ids=[2, 0])
    args = (step, None, [0, 3], END, 7)
    if beam_size == 1:
        result = ka.greedy_search(*args, **kwargs)
    else:
        result = ka.beam_search(*args, beam_size, **kwargs)
    result = np_result(result)
    np.testing.assert_array_equal(result.lengths, [3, 3])
    ids = result.ids
    assert np.all(ids[:, 3:] == END)
    assert not np.any(np.isin(ids[:, :3], [END, 0, 2]))
    # Bans do not renormalise: three tokens at logit 0, then the end at 10,
    # each against logsumexp([0, 10, 5, 0, 0]).
    lse = np.log(np.exp(10.0) + np.exp(5.0) + 3.0)
    expected = 10.0 - 4 * lse
    np.testing.assert_allclose(result.log_probs, [expected] * 2, rtol=1e-5)


def test_max_length_cuts_open_hypotheses():
    def step(ids, state):
        log_probs = ops.log_softmax(ops.one_hot(ops.full_like(ids, 3), V) * 9.0)
        return log_probs, state, ops.ones((ops.shape(ids)[0], 2))

    for beam_size in (1, 2):
        args = (step, (), [0, 0], END, 5)
        if beam_size == 1:
            result = np_result(ka.greedy_search(*args))
        else:
            result = np_result(ka.beam_search(*args, beam_size))
        np.testing.assert_array_equal(result.ids, np.full((2, 5), 3))
        np.testing.assert_array_equal(result.lengths, [5, 5])
        np.testing.assert_array_equal(result.extras, np.ones((2, 5, 2)))


@pytest.mark.parametrize("beam_size", [1, 2])
def test_max_length_processor_forces_the_end_token(beam_size):
    # Token 3 is the likeliest at every step; the end token is never chosen
    # unless forced.
    def step(ids, state):
        return ops.log_softmax(ops.one_hot(ops.full_like(ids, 3), V) * 9.0), state

    def search(max_length, min_length=0):
        processors = [ka.MaxLength(ops.convert_to_tensor(max_length), END)]
        args = (step, None, [0, 0], END, 5)
        kwargs = dict(min_length=min_length, processors=processors)
        if beam_size == 1:
            return np_result(ka.greedy_search(*args, **kwargs))
        return np_result(ka.beam_search(*args, beam_size, **kwargs))

    result = search(2)
    np.testing.assert_array_equal(result.lengths, [2, 2])
    np.testing.assert_array_equal(result.ids, [[3, 3, END, END, END]] * 2)
    # Two tokens at logit 9, then the forced end at logit 0.
    lse = np.log(np.exp(9.0) + 4.0)
    np.testing.assert_allclose(result.log_probs, [18.0 - 3 * lse] * 2, rtol=1e-6)
    # A maximum at the buffer's length or above cuts nothing.
    np.testing.assert_array_equal(search(5).lengths, [5, 5])
    np.testing.assert_array_equal(search(9).ids, np.full((2, 5), 3))
    # Zero: only the end token; a minimum as long as the maximum still ends.
    np.testing.assert_array_equal(search(0).lengths, [0, 0])
    np.testing.assert_array_equal(search(1, min_length=1).lengths, [1, 1])


def test_custom_processor():
    class OddOnly(ka.LogitsProcessor):
        def __call__(self, log_probs, history, step):
            even = ops.arange(ops.shape(log_probs)[1]) % 2 == 0
            return self.ban(log_probs, even[None])

    tables = make_tables(seed=2)
    result = np_result(
        ka.beam_search(
            make_step(*tables),
            initial_state(STARTS),
            STARTS,
            END,
            4,
            3,
            processors=[OddOnly()],
        )
    )
    assert np.all(result.ids % 2 == 1)


def test_tile_batch():
    tiled = ka.tile_batch({"a": np.array([[1, 2], [3, 4]])}, 3)
    np.testing.assert_array_equal(
        ops.convert_to_numpy(tiled["a"]), [[1, 2]] * 3 + [[3, 4]] * 3
    )


def test_argument_errors():
    step = looping_step()
    with pytest.raises(ValueError, match="beam_size"):
        ka.beam_search(step, None, [0], END, 4, 0)
    with pytest.raises(ValueError, match="max_length"):
        ka.greedy_search(step, None, [0], END, 0)
    with pytest.raises(ValueError, match="Received: n=0"):
        ka.NoRepeatNgram(0)


# ------------------------------------------------------------------ sampling


def sample(tables, **kwargs):
    return np_result(
        ka.sampling_search(
            make_step(*tables), initial_state(STARTS), STARTS, END, 6, **kwargs
        )
    )


@pytest.mark.parametrize(
    "kwargs", [{"top_k": 1}, {"top_p": 1e-4}, {"temperature": 1e-3}]
)
def test_sampling_that_keeps_one_token_is_greedy(kwargs):
    tables = make_tables(seed=5)
    greedy = np_result(
        ka.greedy_search(make_step(*tables), initial_state(STARTS), STARTS, END, 6)
    )
    sampled = sample(tables, seed=3, **kwargs)
    for field in ka.DecodingResult._fields:
        np.testing.assert_allclose(
            getattr(sampled, field), getattr(greedy, field), rtol=1e-5, err_msg=field
        )


def test_sampling_is_reproducible_and_varies_with_the_seed():
    tables = make_tables(seed=4, vocab=7)
    first = sample(tables, seed=11, temperature=1.5)
    np.testing.assert_array_equal(
        first.ids, sample(tables, seed=11, temperature=1.5).ids
    )
    others = [sample(tables, seed=s, temperature=1.5).ids for s in range(12, 16)]
    assert any(not np.array_equal(first.ids, o) for o in others)
    check_extras(first, STARTS)


def compiled(search, *args, **kwargs):
    """`search(*args, **kwargs)`, under `jax.jit` on JAX: one compilation of
    all the halving stages' loops, where eagerly each stage's loop compiles
    on its own."""
    if BACKEND != "jax":
        return search(*args, **kwargs)
    import jax

    return jax.jit(lambda: search(*args, **kwargs))()


def counting_step(step, seen):
    """`step` that appends the number of rows of each call to `seen`."""

    def counted(ids, state):
        seen.append(int(ops.shape(ids)[0]))
        return step(ids, state)

    return counted


@pytest.mark.parametrize(
    "options", [{}, dict(min_length=2, no_repeat_ngram_size=2, banned_ids=[3])]
)
def test_dropping_finished_rows_decodes_the_same(options):
    tables = make_tables(seed=8)
    starts = np.array([0, 2, 3, 4, 0, 2, 4, 3, 1], "int32")
    args = (initial_state(starts), starts, END, 7)
    if BACKEND == "jax":
        with pytest.raises(ValueError, match="drop_finished=True.*backend='jax'"):
            ka.greedy_search(make_step(*tables), *args, drop_finished=True, **options)
    full = ka.greedy_search(make_step(*tables), *args, **options)
    lengths = ops.convert_to_numpy(full.lengths)
    for drop in _DROPS[BACKEND]:
        seen = []
        step = counting_step(make_step(*tables), seen)
        dropped = compiled(ka.greedy_search, step, *args, drop_finished=drop, **options)
        _assert_same(full._asdict(), dropped._asdict())
        # The rows still open before each step were computed: no more with
        # `True`, a batch of 9 halved to 4, 2, 1 (more than half open).
        open_rows = [int((lengths >= t).sum()) for t in range(len(seen))]
        assert seen[0] == len(starts) and min(seen) < len(starts)
        if BACKEND == "jax":  # JAX traces each stage's loop once
            assert sorted(set(seen)) == [1, 2, 4, 9], seen
        elif drop is True:
            assert seen == open_rows
        else:
            assert all(s in (9, 4, 2, 1) for s in seen), seen
            assert all(o <= s < 2 * o for s, o in zip(seen, open_rows, strict=True)), (
                seen,
                open_rows,
            )


def test_halving_a_batch_larger_than_its_stages_with_rows_cut_at_max_length():
    # 2 ** 6 = 64 < 70 rows: the last stage keeps 2 rows and runs to the end.
    starts = np.random.default_rng(0).integers(0, V, 70).astype("int32")
    args = (initial_state(starts), starts, END, 3)
    tables = make_tables(seed=8)
    full = ka.greedy_search(make_step(*tables), *args)
    assert (ops.convert_to_numpy(full.lengths) == 3).any(), "rows must be cut"
    for drop in _DROPS[BACKEND]:
        dropped = compiled(
            ka.greedy_search, make_step(*tables), *args, drop_finished=drop
        )
        _assert_same(full._asdict(), dropped._asdict())


def test_drop_finished_takes_true_false_or_halves():
    with pytest.raises(ValueError, match="Received: drop_finished='half'"):
        ka.greedy_search(
            make_step(*make_tables(seed=3)),
            None,
            np.zeros(2, "int32"),
            END,
            3,
            drop_finished="half",
        )


# ------------------------------------------------------------------ compiled


def _searches(starts, bigram, by_prefix):
    step = make_step(bigram, by_prefix)
    common = dict(min_length=1, no_repeat_ngram_size=2)
    args = (initial_state(starts), starts, END, 6)
    beam = ka.beam_search(step, *args, 3, length_penalty=0.6, banned_ids=[4], **common)
    greedy = ka.greedy_search(step, *args, **common)
    sampled = ka.sampling_search(step, *args, seed=5, top_k=3, **common)
    return beam._asdict(), greedy._asdict(), sampled._asdict()


def _assert_same(a, b):
    for key in a:
        np.testing.assert_allclose(
            ops.convert_to_numpy(a[key]),
            ops.convert_to_numpy(b[key]),
            rtol=1e-5,
            atol=1e-6,
            err_msg=key,
        )


@pytest.mark.jax_only
def test_jax_jit_equals_eager():
    import jax

    jitted = jax.jit(_searches)
    # One shape: each compiles the three searches anew (~10 s).
    for vocab, starts in [(7, [6, 0, 3])]:
        tables = make_tables(seed=vocab, vocab=vocab)
        starts = np.array(starts, "int32")
        for e, j in zip(
            _searches(starts, *tables), jitted(starts, *tables), strict=True
        ):
            _assert_same(e, j)


_SIGNATURE = [(None,), (None, None, None), (None, None)]


@pytest.mark.tf_only
def test_tf_function_with_dynamic_batch_and_vocab_equals_eager():
    import tensorflow as tf

    signature = [
        tf.TensorSpec(s, d) for s, d in zip(_SIGNATURE, TF_DTYPES, strict=True)
    ]
    graph_search = tf.function(_searches, input_signature=signature)
    for vocab, starts in [(V, [0, 2, 3]), (7, [6, 0]), (6, [])]:
        tables = make_tables(seed=vocab, vocab=vocab)
        starts = tf.constant(starts, tf.int32)
        for e, g in zip(
            _searches(starts, *tables), graph_search(starts, *tables), strict=True
        ):
            _assert_same(e, g)
    assert len(graph_search._list_all_concrete_functions()) == 1


TF_DTYPES = ["int32", "float32", "float32"]


@pytest.mark.tf_only
def test_dropping_finished_rows_in_a_tf_function():
    import tensorflow as tf

    def greedy(starts, bigram, by_prefix, drop):
        step = make_step(bigram, by_prefix)
        args = (initial_state(starts), starts, END, 6)
        return ka.greedy_search(step, *args, drop_finished=drop)._asdict()

    signature = [
        tf.TensorSpec(s, d) for s, d in zip(_SIGNATURE, TF_DTYPES, strict=True)
    ]
    programs = []
    for drop in (True, "halves"):
        programs.append(
            tf.function(lambda *a, d=drop: greedy(*a, d), input_signature=signature)
        )
    programs.append(tf.function(lambda *a: greedy(*a, True)))
    # Fixed shapes in each stage: XLA compiles it (once: one shape), also
    # traced for any batch, as in a SavedModel.
    xla = [
        tf.function(lambda *a: greedy(*a, "halves"), jit_compile=True, **kwargs)
        for kwargs in ({}, {"input_signature": signature})
    ]
    for vocab, starts in [(V, [0, 2, 3, 4, 1, 0, 2, 3]), (7, [6, 0]), (6, [])]:
        tables = make_tables(seed=vocab, vocab=vocab)
        starts = tf.constant(starts, tf.int32)
        expected = greedy(starts, *tables, False)
        for program in programs + (xla if vocab == V else []):
            _assert_same(expected, program(starts, *tables))


@pytest.mark.tf_only
def test_saved_model_round_trip(tmp_path):
    import tensorflow as tf

    class Searcher(tf.Module):
        def __init__(self, tables):
            super().__init__()
            self.bigram = tf.Variable(tables[0])
            self.by_prefix = tf.Variable(tables[1])

        @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
        def __call__(self, starts):
            beam, greedy, sampled = _searches(starts, self.bigram, self.by_prefix)
            return {
                **{f"beam_{k}": v for k, v in beam.items()},
                "greedy_ids": greedy["ids"],
                "sampled_ids": sampled["ids"],
            }

    module = Searcher(make_tables(seed=11))
    starts = tf.constant([0, 2, 3])
    expected = module(starts)
    tf.saved_model.save(module, str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))
    _assert_same(expected, loaded(starts))
    _assert_same(module(tf.constant([4])), loaded(tf.constant([4])))
    # Only stock ops: nothing a serving binary would lack.
    graph = loaded.signatures["serving_default"].graph.as_graph_def()
    ops_used = {n.op for n in graph.node}
    for f in graph.library.function:
        ops_used |= {n.op for n in f.node_def}
    assert not {"PyFunc", "EagerPyFunc", "PyFuncStateless"} & ops_used


def _a_backend_without_tensorflow():
    """This run's backend unless it is TensorFlow; else an installed other one."""
    if BACKEND != "tensorflow":
        return BACKEND
    for name in ("torch", "jax"):
        if importlib.util.find_spec(name) is not None:
            return name
    pytest.skip("neither torch nor JAX is installed beside TensorFlow")


def test_import_and_search_do_not_import_tensorflow():
    code = (
        "import sys, numpy as np, keras_attn as ka\n"
        "from keras import ops\n"
        "step = lambda ids, s: (ops.log_softmax(ops.ones((ops.shape(ids)[0], 4))), s)\n"
        "r = ka.beam_search(step, None, np.zeros(2, 'int32'), 1, 3, 2)\n"
        "r = ka.sampling_search(step, None, np.zeros(2, 'int32'), 1, 3, seed=1)\n"
        "assert 'tensorflow' not in sys.modules, 'tensorflow imported'\n"
    )
    env = dict(os.environ, KERAS_BACKEND=_a_backend_without_tensorflow())
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
