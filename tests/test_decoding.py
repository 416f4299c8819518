import pytest

pytestmark = pytest.mark.tf_only

import itertools  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from models import decoding  # noqa: E402

V, END, S = 5, 1, 4
HASH_MOD, HASH_ROWS = 9973, 13


def make_tables(seed=0, vocab=V):
    rng = np.random.default_rng(seed)
    bigram = rng.normal(0.0, 2.0, (vocab, vocab, vocab)).astype("float32")
    by_prefix = rng.normal(0.0, 1.0, (HASH_ROWS, vocab)).astype("float32")
    return bigram, by_prefix


def make_step_fn(bigram, by_prefix):
    """Log-probs depend on the last two tokens and a hash of the whole prefix.

    The state carries the token before last and the prefix hash, so a search
    that fails to reorder the state gets different log-probs. The attention
    `[prev2, prev1, hash % 13, step]` identifies the hypothesis and the step.
    """
    bigram = tf.convert_to_tensor(bigram)
    by_prefix = tf.convert_to_tensor(by_prefix)

    def step_fn(ids, state, step):
        prev2, prefix_hash = state["prev2"], state["hash"]
        new_hash = (prefix_hash * 7 + ids + 1) % HASH_MOD
        logits = tf.gather_nd(bigram, tf.stack([prev2, ids], -1)) + tf.gather(
            by_prefix, new_hash % HASH_ROWS
        )
        attention = tf.cast(
            tf.stack(
                [prev2, ids, new_hash % HASH_ROWS, tf.fill(tf.shape(ids), step)], -1
            ),
            tf.float32,
        )
        new_state = {"prev2": ids, "hash": new_hash}
        return tf.nn.log_softmax(logits), new_state, attention

    return step_fn


def initial_state(start_ids):
    start_ids = tf.convert_to_tensor(start_ids, tf.int32)
    return {"prev2": start_ids, "hash": tf.zeros_like(start_ids)}


def np_log_softmax(x):
    x = x.astype("float64")
    x = x - x.max()
    return x - np.log(np.exp(x).sum())


def np_step(bigram, by_prefix, prev2, prev1, prefix_hash):
    new_hash = (prefix_hash * 7 + prev1 + 1) % HASH_MOD
    logits = bigram[prev2, prev1] + by_prefix[new_hash % HASH_ROWS]
    return np_log_softmax(logits), new_hash


def has_repeated_ngram(tokens, n):
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return len(grams) != len(set(grams))


def brute_force(tables, start, max_length, min_length=0, banned=(), ngram=0, alpha=0.0):
    """Best `(tokens, log_prob, score)` over every admissible sequence."""
    bigram, by_prefix = tables
    vocab = bigram.shape[-1]
    best = None
    for length in range(1, max_length + 1):
        for seq in itertools.product(range(vocab), repeat=length):
            ended = seq[-1] == END
            if END in seq[:-1] or (length < max_length and not ended):
                continue
            if any(t in banned for t in seq):
                continue
            if ended and length - 1 < min_length:
                continue
            if ngram and has_repeated_ngram(seq, ngram):
                continue
            prev2, prev1, h, total = start, start, 0, 0.0
            for token in seq:
                log_probs, h = np_step(bigram, by_prefix, prev2, prev1, h)
                total += log_probs[token]
                prev2, prev1 = prev1, token
            score = total / ((5.0 + length) / 6.0) ** alpha
            if best is None or score > best[2]:
                best = (list(seq), total, score)
    return best


def unpad(result, b):
    """Tokens of example `b` up to and including the end token."""
    length = int(result.lengths[b])
    ids = np.asarray(result.ids[b])
    return list(ids[: length + 1]) if length < ids.shape[0] else list(ids)


def check_attention(result, starts):
    """Attention rows describe the chosen hypothesis, then zeros."""
    ids, lengths = np.asarray(result.ids), np.asarray(result.lengths)
    attention = np.asarray(result.attention)
    for b, start in enumerate(starts):
        seq = [start, start] + list(ids[b])
        h = 0
        for t in range(ids.shape[1]):
            h = (h * 7 + seq[t + 1] + 1) % HASH_MOD
            if t < lengths[b]:
                expected = [seq[t], seq[t + 1], h % HASH_ROWS, t]
            else:
                expected = [0, 0, 0, 0]
            np.testing.assert_allclose(attention[b, t], expected, err_msg=f"{b},{t}")


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
@pytest.mark.parametrize("penalty_as_tensor", [False, True])
def test_exhaustive_beam_equals_brute_force(options, penalty_as_tensor):
    tables = make_tables(seed=3)
    alpha = options.get("alpha", 0.0)
    result = decoding.beam_search(
        make_step_fn(*tables),
        initial_state(STARTS),
        tf.constant(STARTS),
        end_id=END,
        beam_size=EXHAUSTIVE_BEAM,
        max_length=MAX_LEN,
        min_length=options.get("min_length", 0),
        # A tensor penalty (one graph for every value) decodes the same.
        length_penalty=tf.constant(alpha) if penalty_as_tensor else alpha,
        banned_ids=options.get("banned", ()),
        no_repeat_ngram_size=options.get("ngram", 0),
    )
    for b, start in enumerate(STARTS):
        tokens, log_prob, score = brute_force(
            tables,
            start,
            MAX_LEN,
            min_length=options.get("min_length", 0),
            banned=options.get("banned", ()),
            ngram=options.get("ngram", 0),
            alpha=options.get("alpha", 0.0),
        )
        assert unpad(result, b) == tokens
        np.testing.assert_allclose(result.log_probs[b], log_prob, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(result.scores[b], score, rtol=1e-5, atol=1e-5)
    check_attention(result, STARTS)


@pytest.mark.parametrize("seed", [0, 5, 9])
def test_no_search_beats_the_exhaustive_beam(seed):
    # "Beam >= greedy" holds only for some inputs; what always holds is that
    # no search ends above the optimum, which the exhaustive beam finds.
    tables = make_tables(seed=seed)
    kwargs = dict(end_id=END, max_length=MAX_LEN)
    greedy = decoding.greedy_search(
        make_step_fn(*tables), initial_state(STARTS), STARTS, **kwargs
    )
    small, exhaustive = (
        decoding.beam_search(
            make_step_fn(*tables),
            initial_state(STARTS),
            STARTS,
            beam_size=size,
            **kwargs,
        )
        for size in (3, EXHAUSTIVE_BEAM)
    )
    best = exhaustive.log_probs.numpy()
    for b, start in enumerate(STARTS):
        assert best[b] == pytest.approx(
            brute_force(tables, start, MAX_LEN)[1], abs=1e-4
        )
    assert np.all(greedy.log_probs.numpy() <= best + 1e-5)
    assert np.all(small.log_probs.numpy() <= best + 1e-5)
    check_attention(small, STARTS)
    check_attention(greedy, STARTS)


@pytest.mark.parametrize(
    "options",
    [{}, {"min_length": 3, "banned_ids": [0, 4], "no_repeat_ngram_size": 2}],
    ids=["plain", "constrained"],
)
def test_beam_size_one_equals_greedy(options):
    tables = make_tables(seed=7)
    kwargs = dict(end_id=END, max_length=8, **options)
    greedy = decoding.greedy_search(
        make_step_fn(*tables), initial_state(STARTS), STARTS, **kwargs
    )
    beam = decoding.beam_search(
        make_step_fn(*tables), initial_state(STARTS), STARTS, beam_size=1, **kwargs
    )
    for field in ("ids", "lengths", "log_probs", "scores", "attention"):
        np.testing.assert_allclose(
            getattr(beam, field), getattr(greedy, field), rtol=1e-6, err_msg=field
        )
    np.testing.assert_allclose(greedy.scores, greedy.log_probs)


@pytest.mark.parametrize(
    "options",
    [{}, {"min_length": 2, "banned_ids": [4], "no_repeat_ngram_size": 2}],
    ids=["plain", "constrained"],
)
def test_greedy_dropping_ended_rows_decodes_the_same(options):
    tables = make_tables(seed=11)
    starts = [0, 2, 3, 4, 2, 0]
    kwargs = dict(end_id=END, max_length=8, **options)
    seen_rows = []
    step_fn = make_step_fn(*tables)

    def counting_step_fn(ids, state, step):
        seen_rows.append(int(tf.size(ids)))
        return step_fn(ids, state, step)

    kept = decoding.greedy_search(step_fn, initial_state(starts), starts, **kwargs)
    dropped = decoding.greedy_search(
        counting_step_fn, initial_state(starts), starts, drop_finished=True, **kwargs
    )
    lengths = kept.lengths.numpy()
    assert len(set(lengths)) > 1  # rows end at different steps
    for field in ("ids", "lengths", "log_probs", "scores", "attention"):
        np.testing.assert_allclose(
            getattr(dropped, field), getattr(kept, field), rtol=1e-6, err_msg=field
        )
    # Step t computes only the rows still open: those longer than t - 1.
    expected = [int(np.sum(lengths >= t)) for t in range(len(seen_rows))]
    assert seen_rows == [len(starts)] + expected[1:]
    assert seen_rows[-1] < len(starts)
    check_attention(dropped, starts)


def looping_step_fn(vocab=6, boost=8.0, end_logit=-10.0):
    """Strongly prefers the cycle 2 -> 3 -> 2 -> ..., almost never ends."""
    logits = np.zeros((vocab, vocab), "float32")
    for a, b in [(0, 2), (2, 3), (3, 2), (4, 2), (5, 3)]:
        logits[a, b] = boost
    logits[:, END] = end_logit
    table = tf.constant(logits)

    def step_fn(ids, state, step):
        log_probs = tf.nn.log_softmax(tf.gather(table, ids))
        return log_probs, state, tf.one_hot(ids, 3)

    return step_fn


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("beam_size", [1, 4])
def test_no_repeated_ngrams(n, beam_size):
    starts = [0, 4, 5]
    # n=1 allows only 5 distinct non-end tokens: end must be allowed by then.
    min_length = 4 if n == 1 else 6
    kwargs = dict(
        end_id=END, max_length=9, min_length=min_length, no_repeat_ngram_size=n
    )
    if beam_size == 1:
        result = decoding.greedy_search(looping_step_fn(), {}, starts, **kwargs)
    else:
        result = decoding.beam_search(
            looping_step_fn(), {}, starts, beam_size=beam_size, **kwargs
        )
    for b in range(len(starts)):
        tokens = unpad(result, b)
        assert not has_repeated_ngram(tokens, n), tokens
        assert result.lengths[b] >= min_length
        assert np.isfinite(result.log_probs[b])
    # Without blocking the cycle repeats.
    free = decoding.greedy_search(
        looping_step_fn(), {}, starts, end_id=END, max_length=9
    )
    assert has_repeated_ngram(unpad(free, 0), 3)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_min_length_and_banned_ids(beam_size):
    # End is by far the likeliest token, and 2 the likeliest after it.
    logits = np.zeros((V, V), "float32")
    logits[:, END] = 10.0
    logits[:, 2] = 5.0
    table = tf.constant(logits)

    def step_fn(ids, state, step):
        return (
            tf.nn.log_softmax(tf.gather(table, ids)),
            state,
            tf.zeros([tf.size(ids), 2]),
        )

    kwargs = dict(end_id=END, max_length=7, min_length=3, banned_ids=[2, 0])
    starts = [0, 3]
    if beam_size == 1:
        result = decoding.greedy_search(step_fn, None, starts, **kwargs)
    else:
        result = decoding.beam_search(step_fn, None, starts, beam_size=3, **kwargs)
    np.testing.assert_array_equal(result.lengths, [3, 3])
    ids = result.ids.numpy()
    assert ids.shape == (2, 4)  # stopped early: 3 tokens and the end
    assert np.all(ids[:, 3] == END) and not np.any(np.isin(ids[:, :3], [END, 0, 2]))


def test_max_length_cuts_open_hypotheses():
    def step_fn(ids, state, step):
        log_probs = tf.nn.log_softmax(tf.one_hot(tf.fill(tf.shape(ids), 3), V) * 9.0)
        return log_probs, state, tf.ones([tf.size(ids), 2])

    for beam_size in (1, 2):
        kwargs = dict(end_id=END, max_length=5)
        if beam_size == 1:
            result = decoding.greedy_search(step_fn, (), [0, 0], **kwargs)
        else:
            result = decoding.beam_search(step_fn, (), [0, 0], beam_size=2, **kwargs)
        np.testing.assert_array_equal(result.ids, np.full((2, 5), 3))
        np.testing.assert_array_equal(result.lengths, [5, 5])
        np.testing.assert_array_equal(result.attention, np.ones((2, 5, 2)))


def test_tile_batch():
    tiled = decoding.tile_batch({"a": tf.constant([[1, 2], [3, 4]])}, 3)
    np.testing.assert_array_equal(tiled["a"], [[1, 2]] * 3 + [[3, 4]] * 3)


def _searches(starts, bigram, by_prefix):
    step_fn = make_step_fn(bigram, by_prefix)
    common = dict(end_id=END, max_length=6, min_length=1, no_repeat_ngram_size=2)
    beam = decoding.beam_search(
        step_fn,
        initial_state(starts),
        starts,
        beam_size=3,
        length_penalty=0.6,
        banned_ids=[4],
        **common,
    )
    greedy = decoding.greedy_search(step_fn, initial_state(starts), starts, **common)
    dropped = decoding.greedy_search(
        step_fn, initial_state(starts), starts, drop_finished=True, **common
    )
    return beam._asdict(), greedy._asdict(), dropped._asdict()


_SIGNATURE = [
    tf.TensorSpec([None], tf.int32),
    tf.TensorSpec([None, None, None], tf.float32),
    tf.TensorSpec([None, None], tf.float32),
]


def _assert_same(a, b):
    for key in a:
        np.testing.assert_allclose(a[key], b[key], rtol=1e-5, atol=1e-6, err_msg=key)


def test_eager_equals_tf_function_with_dynamic_batch_and_vocab():
    graph_search = tf.function(_searches, input_signature=_SIGNATURE)
    for vocab, starts in [(V, [0, 2, 3]), (7, [6, 0]), (6, [])]:
        tables = make_tables(seed=vocab, vocab=vocab)
        starts = tf.constant(starts, tf.int32)
        eager = _searches(starts, *tables)
        graph = graph_search(starts, *tables)
        for e, g in zip(eager, graph, strict=True):
            _assert_same(e, g)
        _assert_same(eager[1], eager[2])  # dropping ended rows changes nothing
        check_attention(decoding.DecodingResult(**eager[0]), starts.numpy())
    assert len(graph_search._list_all_concrete_functions()) == 1


class _Searcher(tf.Module):
    def __init__(self, tables):
        super().__init__()
        self.bigram = tf.Variable(tables[0])
        self.by_prefix = tf.Variable(tables[1])

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
    def __call__(self, starts):
        beam, greedy, _ = _searches(starts, self.bigram, self.by_prefix)
        return {
            **{f"beam_{k}": v for k, v in beam.items()},
            "greedy_ids": greedy["ids"],
        }


def test_saved_model_round_trip(tmp_path):
    module = _Searcher(make_tables(seed=11))
    starts = tf.constant([0, 2, 3])
    expected = module(starts)
    tf.saved_model.save(module, str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))
    _assert_same(expected, loaded(starts))
    _assert_same(module(tf.constant([4])), loaded(tf.constant([4])))
    # Only stock ops: nothing a serving binary would lack.
    graph = loaded.signatures["serving_default"].graph.as_graph_def()
    ops = {n.op for n in graph.node}
    for f in graph.library.function:
        ops |= {n.op for n in f.node_def}
    assert not {"PyFunc", "EagerPyFunc", "PyFuncStateless"} & ops
    assert not any(op.startswith("Addons") for op in ops)
