"""The Pointer Networks' planar problems (`papers/planar_problems.py`).

Held-Karp against brute force, the local searches against every neighbour
tour enumerated here from scratch, the polygons by hand.
"""

import itertools
import math

import numpy as np
import pytest

from papers import planar_problems as pp

# A unit square (indices 0-3 counter-clockwise from (0, 0)) and its centre.
SQUARE = np.array([[0, 0], [1, 0], [1, 1], [0, 1], [0.5, 0.5]], "float64")


def _edges(tour):
    n = len(tour)
    return {frozenset((tour[k], tour[(k + 1) % n])) for k in range(n)}


def _tours_from_0(n):
    return [(0, *rest) for rest in itertools.permutations(range(1, n))]


# ------------------------------------------------------------------ exact


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7])
def test_held_karp_matches_brute_force(n):
    points = pp.make_points(12, n, seed=n)
    tours, lengths = pp.held_karp(points)
    for p, tour, length in zip(points, tours, lengths, strict=True):
        assert tour[0] == 0 and sorted(tour) == list(range(n))
        np.testing.assert_allclose(pp.tour_length(p, tour), length, rtol=1e-12)
        np.testing.assert_allclose(length, pp.brute_force_tsp(p), rtol=1e-12)
        if n > 2:
            assert pp.signed_area(p, tour) > 0  # counter-clockwise


def test_held_karp_by_hand():
    # The square's corners shuffled: the optimal tour is its perimeter, 4.
    points = SQUARE[[0, 2, 1, 3]][None]
    tours, lengths = pp.held_karp(points)
    np.testing.assert_allclose(lengths, [4.0])
    # From corner (0, 0) counter-clockwise: (1, 0), (1, 1), (0, 1).
    np.testing.assert_array_equal(tours, [[0, 2, 1, 3]])


def test_counter_clockwise_by_hand():
    # The square clockwise from 0 turns round; a counter-clockwise one stays.
    tours = pp.counter_clockwise(
        SQUARE[None, :4].repeat(2, 0), [[0, 3, 2, 1], [0, 1, 2, 3]]
    )
    np.testing.assert_array_equal(tours, [[0, 1, 2, 3], [0, 1, 2, 3]])


# ------------------------------------------------------------------ local search


@pytest.mark.parametrize("or_opt", [False, True])
def test_every_move_changes_the_length_by_its_edges(or_opt):
    """Each move's gain from its removed and added edges is the true change of
    length, its order is a tour from city 0, and no two moves are alike."""
    n = 8
    points = pp.make_points(1, n, seed=4)[0]
    tour = np.random.default_rng(0).permutation(np.arange(1, n))
    tour = np.concatenate([[0], tour])
    d = pp.distances(points)
    orders, removed, added = pp.move_table(n, or_opt)
    assert orders.shape[1] == n and np.all(orders[:, 0] == 0)
    before = pp.tour_length(points, tour)
    for order, out, new in zip(orders, removed, added, strict=True):
        assert sorted(order) == list(range(n))
        moved = tour[order]
        gain = d[tour[out[:, 0]], tour[out[:, 1]]].sum()
        gain -= d[tour[new[:, 0]], tour[new[:, 1]]].sum()
        assert gain == pytest.approx(before - pp.tour_length(points, moved), abs=1e-12)
    cycles = {frozenset(_edges(tuple(o))) for o in orders}
    assert len(cycles) == len(orders)


def test_the_moves_are_the_tours_two_edges_away_and_each_city_moved():
    # n = 9: city 0 moved to the middle is no block of 3 or fewer moved.
    n = 9
    base = _edges(tuple(range(n)))
    two_away = {
        frozenset(_edges(t)) for t in _tours_from_0(n) if len(_edges(t) - base) == 2
    }
    orders = pp.move_table(n, or_opt=False)[0]
    assert {frozenset(_edges(tuple(o))) for o in orders} == two_away
    # With Or-opt: those, and each single city (city 0 too) moved elsewhere.
    moved_city = set()
    for city, after in itertools.product(range(n), range(n)):
        if after == city:
            continue
        rest = [c for c in range(n) if c != city]
        k = rest.index(after)
        moved_city.add(frozenset(_edges(tuple(rest[: k + 1] + [city] + rest[k + 1 :]))))
    with_or_opt = {frozenset(_edges(tuple(o))) for o in pp.move_table(n, True)[0]}
    assert two_away | (moved_city - {frozenset(base)}) <= with_or_opt


@pytest.mark.parametrize("or_opt", [False, True])
def test_local_search_ends_where_no_neighbour_is_shorter(or_opt):
    """Its tours are local optima: no tour two edges away is shorter, and
    with Or-opt no tour with a block of 1-3 consecutive cities moved is
    either, city 0's blocks included (both enumerated here over every tour
    from city 0)."""
    n = 7
    points = pp.make_points(8, n, seed=5)
    starts = np.tile(np.arange(n), (8, 1))
    tours = pp.local_search(points, starts, or_opt=or_opt)
    everything = _tours_from_0(n)
    for p, tour in zip(points, tours, strict=True):
        assert tour[0] == 0 and sorted(tour) == list(range(n))
        length, edges = pp.tour_length(p, tour), _edges(tuple(tour))
        for other in everything:
            apart = len(_edges(other) - edges)
            if apart == 2 or (or_opt and apart == 3 and _block_moved(tour, other)):
                assert pp.tour_length(p, other) >= length - 1e-12


def _block_moved(tour, other):
    """Whether `other` is `tour` with 1-3 consecutive cities moved."""
    n = len(tour)

    def blocks(cycle, size):
        return [frozenset(cycle[(i + k) % n] for k in range(size)) for i in range(n)]

    for size in (1, 2, 3):
        for block in set(blocks(tour, size)) & set(blocks(other, size)):
            rest = [_edges([c for c in t if c not in block]) for t in (tour, other)]
            if rest[0] == rest[1]:
                return True
    return False


def test_2_opt_uncrosses_the_square():
    crossing = [[0, 2, 1, 3]]
    assert pp.tour_length(SQUARE[:4], crossing[0]) == pytest.approx(
        2 + 2 * math.sqrt(2)
    )
    tours = pp.local_search(SQUARE[None, :4], crossing, or_opt=False)
    assert pp.tour_length(SQUARE[:4], tours[0]) == pytest.approx(4.0)


def test_labels_against_the_optimum():
    """At n = 12, Held-Karp's optimum: Or-opt from 5 starts finds it on
    these 40 instances but for at most a few, 2-opt from the nearest
    neighbour is clearly above it; both give valid counter-clockwise tours
    whose stated lengths are their own."""
    points = pp.make_points(40, 12, seed=7)
    optimum = pp.held_karp(points)[1]
    gaps = {}
    for labels in pp.TSP_LABELS:
        tours, lengths = pp.tsp_targets(points, labels, seed=1)
        for p, tour, length in zip(points, tours, lengths, strict=True):
            assert tour[0] == 0 and sorted(tour) == list(range(12))
            assert pp.signed_area(p, tour) > 0
            assert pp.tour_length(p, tour) == pytest.approx(length, rel=1e-12)
        assert np.all(lengths >= optimum - 1e-9)
        gaps[labels] = lengths / optimum - 1
    assert np.mean(gaps["or-opt"] < 1e-9) >= 0.9
    assert gaps["or-opt"].mean() < 0.002
    assert gaps["2-opt"].mean() > 3 * gaps["or-opt"].mean() + 0.001


def test_labels_up_to_10_cities_are_held_karps():
    points = pp.make_points(5, 9, seed=3)
    for labels in pp.TSP_LABELS:
        np.testing.assert_array_equal(
            pp.tsp_targets(points, labels)[0], pp.held_karp(points)[0]
        )


def _first_two_opt(points):
    """The first runs' labels, as their code (commit eb21219) made them:
    nearest neighbour from city 0, then the best 2-opt move until none
    improves, one instance at a time."""
    d = pp.distances(points)
    n = len(d)
    tour, left = [0], set(range(1, n))
    while left:
        tour.append(min(left, key=lambda c: d[tour[-1], c]))
        left.remove(tour[-1])
    tour = np.array(tour)
    i, j = np.triu_indices(n, k=1)
    i, j = i[i >= 1], j[i >= 1]
    while True:
        a, b, c, e = tour[i - 1], tour[i], tour[j], tour[(j + 1) % n]
        delta = d[a, c] + d[b, e] - d[a, b] - d[c, e]
        best = int(np.argmin(delta))
        if delta[best] > -1e-10:
            break
        tour[i[best] : j[best] + 1] = tour[i[best] : j[best] + 1][::-1].copy()
    return pp.counter_clockwise(points[None], tour[None])[0]


@pytest.mark.parametrize("n", [15, 20])
def test_2_opt_labels_are_the_first_runs_tours(n):
    """`tsp-5-20` resumes on the data it started with."""
    points = pp.make_points(30, n, seed=n)
    tours, lengths = pp.tsp_targets(points, "2-opt")
    for p, tour in zip(points, tours, strict=True):
        np.testing.assert_array_equal(tour, _first_two_opt(p))
    np.testing.assert_allclose(lengths, pp.tour_lengths(points, tours))


def test_bad_settings_say_what_was_received():
    points = pp.make_points(2, 12, seed=0)
    with pytest.raises(ValueError, match="Received: labels='3-opt'"):
        pp.tsp_targets(points, "3-opt")
    with pytest.raises(ValueError, match="Received: starts=0"):
        pp.tsp_targets(points, "or-opt", starts=0)


# ------------------------------------------------------------------ hulls


def test_hull_order_by_hand():
    # The centre (4) is inside; starting from index 0, counter-clockwise.
    assert pp.convex_hull(SQUARE) == [0, 1, 2, 3]
    # Shuffled so the lowest hull index is not the leftmost point:
    # [(1, 1), (0, 0), (0.5, 0.5), (0, 1), (1, 0)].
    shuffled = SQUARE[[2, 0, 4, 3, 1]]
    assert pp.convex_hull(shuffled) == [0, 3, 1, 4]
    # A point on an edge is not a vertex.
    on_edge = np.vstack([SQUARE[:4], [[0.5, 0.0]]])
    assert pp.convex_hull(on_edge) == [0, 1, 2, 3]


def test_simple_polygons_by_hand():
    assert pp.is_simple_polygon(SQUARE, [0, 1, 2, 3])
    assert pp.is_simple_polygon(SQUARE, [3, 2, 1, 0])  # either direction
    assert pp.is_simple_polygon(SQUARE, [0, 1, 4])  # a triangle
    assert not pp.is_simple_polygon(SQUARE, [0, 2, 1, 3])  # a bow tie
    assert not pp.is_simple_polygon(SQUARE, [0, 1])  # two points
    assert not pp.is_simple_polygon(SQUARE, [0, 1, 2, 1])  # a repeat
    assert not pp.is_simple_polygon(SQUARE, [0, 4, 2])  # collinear: no area
    # Non-adjacent edges touching at a point: (0,0)-(1,0) and the vertex
    # (0.5, 0) of a dart.
    dart = np.array([[0, 0], [1, 0], [1, 1], [0.5, 0.0], [0, 1]], "float64")
    assert not pp.is_simple_polygon(dart, [0, 1, 2, 3, 4])
