"""ROUGE on token ids (`keras_attn.rouge_n`, `rouge_l`, `rouge_cost`): hand-
computed values, the end and padding rules, and a pure-Python reference
written from the definitions (clipped n-gram counts, the LCS table) on
random batches, eagerly and compiled."""

import collections

import keras
import numpy as np
import pytest
from keras import ops

import keras_attn as ka

BACKEND = keras.backend.backend()
END, PAD = 2, 0


def np_(x):
    return np.asarray(ops.convert_to_numpy(x))


def tokens(ids, end_id=END, pad_id=PAD):
    """The sequence: the ids before the first end or padding id."""
    out = []
    for i in ids:
        if i in (end_id, pad_id):
            break
        out.append(int(i))
    return out


def f1(overlap, a, b):
    return 0.0 if a + b == 0 else 2.0 * overlap / (a + b)


def reference_rouge_n(candidate, reference, n):
    def grams(seq):
        return collections.Counter(
            tuple(seq[i : i + n]) for i in range(len(seq) - n + 1)
        )

    c, r = grams(tokens(candidate)), grams(tokens(reference))
    overlap = sum(min(count, r[g]) for g, count in c.items())
    return f1(overlap, sum(c.values()), sum(r.values()))


def reference_rouge_l(candidate, reference):
    a, b = tokens(candidate), tokens(reference)
    table = np.zeros((len(a) + 1, len(b) + 1), int)
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            if a[i - 1] == b[j - 1]:
                table[i, j] = table[i - 1, j - 1] + 1
            else:
                table[i, j] = max(table[i - 1, j], table[i, j - 1])
    return f1(table[-1, -1], len(a), len(b))


def three_scores(candidates, references, end_id=END, pad_id=PAD):
    """ROUGE-1, ROUGE-2 and ROUGE-L F1, stacked on a new first axis."""
    kw = dict(end_id=end_id, pad_id=pad_id)
    return ops.stack(
        [
            ka.rouge_n(candidates, references, 1, **kw),
            ka.rouge_n(candidates, references, 2, **kw),
            ka.rouge_l(candidates, references, **kw),
        ]
    )


def scores(compiled, candidates, references, end_id=END, pad_id=PAD):
    """`three_scores` in numpy, compiled (`compiled`: the fixture)."""
    fn = compiled(three_scores, end_id=end_id, pad_id=pad_id)
    return list(np_(fn(np.asarray(candidates), np.asarray(references))))


def test_the_worked_example(compiled):
    # [5, 6, 7] against [5, 7, 8]: unigrams share 5 and 7, P = R = 2/3; no
    # bigram is shared; the LCS is [5, 7].
    r1, r2, rl = scores(compiled, [[5, 6, 7, END, PAD]], [[5, 7, 8, END]])
    np.testing.assert_allclose(r1, [2 / 3], rtol=1e-6)
    np.testing.assert_allclose(r2, [0.0])
    np.testing.assert_allclose(rl, [2 / 3], rtol=1e-6)


def test_repeated_ngrams_are_clipped(compiled):
    # Unigrams: 5 three times against twice, 6 once: overlap 3 of 4 and 3,
    # F = 6/7. Bigrams (5,5) (5,5) (5,6) against (5,6) (6,5): overlap 1,
    # F = 2/5. LCS of 5 5 5 6 and 5 6 5: 2, F = 4/7.
    r1, r2, rl = scores(compiled, [[5, 5, 5, 6]], [[5, 6, 5]])
    np.testing.assert_allclose(r1, [6 / 7], rtol=1e-6)
    np.testing.assert_allclose(r2, [2 / 5], rtol=1e-6)
    np.testing.assert_allclose(rl, [4 / 7], rtol=1e-6)


def test_precision_and_recall_differ_in_f1(compiled):
    # [5, 6] against [5, 6, 7, 8]: P = 1, R = 1/2, F = 2/3; bigrams: P = 1,
    # R = 1/3, F = 1/2.
    r1, r2, rl = scores(compiled, [[5, 6, END, END]], [[5, 6, 7, 8, END]])
    np.testing.assert_allclose([r1[0], r2[0], rl[0]], [2 / 3, 1 / 2, 2 / 3], rtol=1e-6)


def test_tokens_after_the_first_end_or_padding_do_not_count(compiled):
    references = [[5, 7, END, PAD]] * 4
    candidates = [
        [5, 7, END, 9],  # the 9 after the end is ignored: a perfect match
        [5, 7, PAD, 9],  # padding ends it too
        [5, END, 7, END],  # only [5]
        [END, 5, 7, END],  # empty: F1 = 0
    ]
    r1, r2, rl = scores(compiled, candidates, references)
    np.testing.assert_allclose(r1, [1.0, 1.0, 2 / 3, 0.0], rtol=1e-6)
    np.testing.assert_allclose(r2, [1.0, 1.0, 0.0, 0.0], rtol=1e-6)
    np.testing.assert_allclose(rl, [1.0, 1.0, 2 / 3, 0.0], rtol=1e-6)


def test_without_end_or_padding_ids_every_token_counts(compiled):
    r1, _, _ = scores(compiled, [[5, 0, 2]], [[5, 0, 2]], end_id=None, pad_id=None)
    _, _, rl = scores(compiled, [[5, 0, 2]], [[2, 0, 5]], end_id=None, pad_id=None)
    np.testing.assert_allclose(r1, [1.0])
    np.testing.assert_allclose(rl, [1 / 3], rtol=1e-6)


def test_a_sequence_shorter_than_n_has_no_ngram(compiled):
    trigrams = compiled(ka.rouge_n, n=3)
    np.testing.assert_allclose(
        np_(trigrams(np.array([[5, 6]]), np.array([[5, 6, 7]]))), [0.0]
    )
    np.testing.assert_allclose(
        np_(trigrams(np.array([[5, 6, 7]]), np.array([[5, 6, 7]]))), [1.0]
    )


def random_batch(rng, batch=6, k=5, length=7, ref_length=6, vocab=6):
    """Ids over a small vocabulary (many repeats), with ends and padding."""
    candidates = rng.integers(3, vocab, (batch, k, length))
    ends = rng.integers(0, length + 1, (batch, k))
    for b in range(batch):
        for i in range(k):
            candidates[b, i, ends[b, i] :] = END
    references = rng.integers(3, vocab, (batch, ref_length))
    for b, end in enumerate(rng.integers(0, ref_length, batch)):
        references[b, end] = END
        references[b, end + 1 :] = PAD
    return candidates.astype("int32"), references.astype("int32")


def reference_scores(candidates, references):
    out = np.zeros((3,) + candidates.shape[:2])
    for b, row in enumerate(candidates):
        for i, candidate in enumerate(row):
            out[0, b, i] = reference_rouge_n(candidate, references[b], 1)
            out[1, b, i] = reference_rouge_n(candidate, references[b], 2)
            out[2, b, i] = reference_rouge_l(candidate, references[b])
    return out


@pytest.mark.parametrize("compile_it", [False, True], ids=["eager", "compiled"])
def test_batches_of_candidates_match_the_definitions(compile_it, compiled):
    rng = np.random.default_rng(0)
    candidates, references = random_batch(rng)
    expected = reference_scores(candidates, references)

    fn = compiled(three_scores) if compile_it else three_scores
    got = np_(fn(candidates, references))
    assert got.shape == (3, 6, 5)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


def test_references_with_the_candidates_rank_score_row_by_row(compiled):
    rng = np.random.default_rng(1)
    candidates, references = random_batch(rng, batch=4, k=3)
    tiled = np.repeat(references[:, None], 3, axis=1)
    np.testing.assert_allclose(
        np_(compiled(three_scores)(candidates, tiled)),
        np_(compiled(three_scores)(candidates, references)),
    )


def test_rouge_cost_is_one_minus_the_mean_f1(compiled):
    rng = np.random.default_rng(2)
    candidates, references = random_batch(rng, batch=3, k=4)
    r1, r2, rl = reference_scores(candidates, references)
    cost = compiled(ka.rouge_cost, end_id=END, pad_id=PAD)(candidates, references)
    np.testing.assert_allclose(np_(cost), 1 - (r1 + r2 + rl) / 3, rtol=1e-5)
    only_l = compiled(ka.rouge_cost, end_id=END, rouge_types=["rougeL"])(
        candidates, references
    )
    np.testing.assert_allclose(np_(only_l), 1 - rl, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: ka.rouge_n([[1]], [[1]], 0), r"`n` must be .* Received: n=0"),
        (
            lambda: ka.rouge_cost([[1]], [[1]], rouge_types=["rougeX"]),
            r"rouge_types=\['rougeX'\]",
        ),
        (lambda: ka.rouge_cost([[1]], [[1]], rouge_types=[]), "at least one"),
        (lambda: ka.rouge_l([[1]], [[[1]]]), r"reference_ids.shape=\(1, 1, 1\)"),
    ],
)
def test_bad_arguments_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()
