"""Pointer Networks on hulls and TSP (`papers/pointer_networks.py`).

Its metrics and batches by hand, and a few training steps of each task on a
tiny problem so the script keeps working. `test_papers_planar_problems.py` checks
the data and the reference solutions.
"""

import itertools
import math

import numpy as np
import pytest

from papers import planar_problems


@pytest.fixture(scope="module")
def pn():
    # Imported when a test asks: Keras' backend is set by then.
    from papers import pointer_networks

    return pointer_networks


# A unit square (indices 0-3 counter-clockwise from (0, 0)) and its centre.
SQUARE = np.array([[0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5]], "float64")


# ------------------------------------------------------------------ metrics


def test_cyclic_equal(pn):
    assert pn.cyclic_equal([2, 3, 0, 1], [0, 1, 2, 3])
    assert not pn.cyclic_equal([3, 2, 1, 0], [0, 1, 2, 3])  # clockwise
    assert not pn.cyclic_equal([0, 1, 2], [0, 1, 2, 3])
    assert not pn.cyclic_equal([0, 1, 3, 2], [0, 1, 2, 3])


def test_hull_metrics_by_hand(pn):
    points = np.stack([SQUARE] * 4)
    targets = [[0, 1, 2, 3]] * 4
    predictions = [
        [1, 2, 3, 0],  # correct, area 1
        [0, 1, 2],  # a triangle, area 1/2
        [0, 1, 2, 4, 3],  # through the centre: area 1 - 1/4 = 3/4
        [0, 2, 1, 3],  # a bow tie: not simple
    ]
    metrics = pn.hull_metrics(points, predictions, targets)
    assert metrics["accuracy"] == 0.25
    assert metrics["area"] == pytest.approx((1 + 0.5 + 0.75) / 3)
    assert metrics["not_simple"] == 0.25
    assert metrics["fail"]  # 25% > 1%


# ------------------------------------------------------------------ batches


def test_batches_pad_and_mask(pn):
    groups = planar_problems.make_split("hull", [4, 6], 8, seed=0)
    assert [g["n"] for g in groups] == [4, 6]
    batches = pn.Batches(groups, batch_size=2, pad_to=5, seed=0)
    assert len(batches) == 4
    for index in range(len(batches)):
        (points, targets, mask), y = batches[index]
        width = points.shape[1]
        n = int(mask[0].sum())
        assert width == (5 if n == 4 else 10)
        assert targets.shape == (2, width + 1)
        np.testing.assert_array_equal(y, targets)
        for row in targets:
            length = int(np.argmax(row == 0))  # END
            assert set(row[:length]) <= set(range(1, n + 1))
            assert np.all(row[length + 1 :] == -1)


def test_sizes_of_one_width_share_batches_and_fill_last_gives_one_shape(pn):
    """7 examples of each of n = 3, 6, 8, 10, batches of 4 padded to multiples
    of 5: width 5 holds 7 rows (4 + 3), width 10 holds 21 (5 x 4 + 1). With
    `fill_last` each width's last batch is topped up from its first rows."""
    groups = planar_problems.make_split("hull", [3, 6, 8, 10], 4 * 7, seed=0)

    def rows_and_shapes(fill_last):
        batches = pn.Batches(groups, 4, pad_to=5, seed=0, fill_last=fill_last)
        rows, shapes, sizes = [], set(), []
        for index in range(len(batches)):
            (points, _, mask), _ = batches[index]
            shapes.add(points.shape[:2])
            lengths = mask.sum(axis=1).tolist()
            sizes.append(sorted(set(lengths)))
            rows += [(n, points[b, :n].tobytes()) for b, n in enumerate(lengths)]
        return rows, shapes, sizes

    plain, plain_shapes, sizes = rows_and_shapes(False)
    filled, filled_shapes, _ = rows_and_shapes(True)
    assert plain_shapes == {(4, 5), (3, 5), (4, 10), (1, 10)}
    assert filled_shapes == {(4, 5), (4, 10)}
    # Sizes of one width share a batch: rows 4-7 of width 10 are n = 6 and 8.
    assert [6, 8] in sizes
    # Every example once; the fill adds the first of n = 3 (width 5) and the
    # first three of n = 6 (width 10).
    every = [(g["n"], p.tobytes()) for g in groups for p in g["points"]]
    assert sorted(plain) == sorted(every)
    for row in plain:
        filled.remove(row)
    first = [(3, groups[0]["points"][0])] + [(6, p) for p in groups[1]["points"][:3]]
    assert sorted(filled) == sorted((n, p.tobytes()) for n, p in first)


@pytest.mark.parametrize("task", ["hull", "tsp"])
def test_padding_to_5_or_10_gives_the_same_loss(pn, task):
    """The runner pads to multiples of 5 where the example padded to 10: the
    padded positions are masked, so the loss of a fixed batch is the same."""
    import keras

    from keras_attn.networks.pointer_network import pointer_network_nll

    groups = planar_problems.make_split(task, [4], 3, seed=2)
    keras.utils.set_random_seed(0)
    model, _ = pn.build_model(8, task == "tsp")
    losses = []
    for pad_to in (5, 10):
        (points, targets, mask), y = pn.Batches(groups, 3, pad_to, seed=0)[0]
        assert points.shape[1] == pad_to
        log_probs = model([points, targets, mask])
        losses.append(
            float(keras.ops.convert_to_numpy(pointer_network_nll(log_probs, y)))
        )
    assert losses[0] > 0.5
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)


# ------------------------------------------------------------------ end to end


def _rotation_of(pred, true):
    """Whether `pred` is `true` started at another point (same direction)."""
    return len(pred) == len(true) and any(
        list(np.roll(true, -k)) == list(pred) for k in range(len(true))
    )


def _brute_force_length(points):
    """The shortest closed tour through `points`, over every order."""
    n = len(points)
    return min(
        np.linalg.norm(
            points[list(order)] - points[list(order[1:] + order[:1])], axis=1
        ).sum()
        for order in ((0, *rest) for rest in itertools.permutations(range(1, n)))
    )


@pytest.mark.tf_only
@pytest.mark.slow
@pytest.mark.parametrize("task", ["hull", "tsp"])
def test_example_runs(pn, task, tmp_path, monkeypatch):
    groups, decoded = [], []
    real_evaluate, real_decode = pn.evaluate, pn.decode

    def evaluate(task, layer, test_groups, beam_size):
        groups.extend(test_groups)
        return real_evaluate(task, layer, test_groups, beam_size)

    def decode(*args, **kwargs):
        decoded.append(real_decode(*args, **kwargs))
        return decoded[-1]

    monkeypatch.setattr(pn, "evaluate", evaluate)
    monkeypatch.setattr(pn, "decode", decode)
    result = pn.run(
        task,
        train_n=[4, 5],
        test_n=[5],
        train_size=16,
        test_size=4,
        units=8,
        batch_size=8,
        max_steps=2,
        beam_size=2,
        output=tmp_path,
        progress=False,
    )
    assert (tmp_path / f"{task}.json").exists()
    assert result["train_steps"] == 2
    assert math.isfinite(result["final_loss"])
    assert set(result["results"]) == {5}
    metrics = result["results"][5]
    # The metrics again, from the decoded sequences.
    [group], [preds] = groups, decoded
    points = group["points"]
    assert len(preds) == len(points) == 4
    if task == "hull":
        # Hull decoding may point at a point twice, never outside the set.
        assert all(set(pred) <= set(range(5)) for pred in preds), preds
        targets = group["targets"]
        right = [_rotation_of(p, t) for p, t in zip(preds, targets, strict=True)]
        assert metrics["accuracy"] == np.mean(right)
        for key in ("not_simple", "fail"):
            assert metrics[key] == pn.hull_metrics(points, preds, targets)[key]
    else:
        # Every tour is a permutation of the points, so at least as long as
        # the optimal one, found here by trying every order.
        assert all(sorted(p) == list(range(5)) for p in preds), preds
        lengths = [
            np.linalg.norm(x[p] - x[np.roll(p, -1)], axis=1).sum()
            for x, p in zip(points, preds, strict=True)
        ]
        optimal = [_brute_force_length(x) for x in points]
        assert metrics["reference"] == "optimal"
        assert metrics["tour_length"] == pytest.approx(np.mean(lengths))
        assert metrics["reference_length"] == pytest.approx(np.mean(optimal))
        assert metrics["tour_length"] >= metrics["reference_length"] - 1e-9
