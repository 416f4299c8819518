"""The Pointer Networks' planar problems and their reference solutions.

Numpy only (no Keras), so that data and references can be built and tested
apart from the model:

* points uniform in the unit square;
* the convex hull (Andrew's monotone chain) and simple-polygon checks;
* travelling salesman tours: exact by Held-Karp (`n <= ~13` in memory per
  batch, `n = 20` one instance at a time), or by local search: best-
  improvement 2-opt and Or-opt moves, vectorized over a batch of instances.

Tours start at city 0 and run counter-clockwise (positive signed area), so
that one tour has one target sequence.

Label quality against Held-Karp's optimum at `n = 20`
(`docs/pointer-networks.md`, "Training labels above n = 10"): 2-opt from
the nearest-neighbour tour, the heuristic of the first runs, is 1.7% over
it; 2-opt with Or-opt from 5 random starts, 0.02%.
"""

import functools
import itertools

import numpy as np

HELD_KARP_MAX_N = 10
TSP_LABELS = ("2-opt", "or-opt")
_EPS = 1e-12


def make_points(num, n, seed):
    """`(num, n, 2)` float32 points uniform in the unit square."""
    return np.random.default_rng(seed).uniform(size=(num, n, 2)).astype("float32")


# ------------------------------------------------------------------ polygons


def signed_area(points, order):
    """Shoelace area of the polygon `points[order]`; > 0 counter-clockwise."""
    p = np.asarray(points, np.float64)[list(order)]
    x, y = p[:, 0], p[:, 1]
    return 0.5 * float(np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y))


def _cross(o, a, b):
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def convex_hull(points):
    """Hull vertex indices, counter-clockwise from the lowest index.

    Andrew's monotone chain; collinear points on an edge are left out.
    """
    pts = np.asarray(points, np.float64).tolist()  # Python floats: 10x faster.
    order = sorted(range(len(pts)), key=lambda i: pts[i])
    if len(order) < 3:
        return order

    def chain(indices):
        out = []
        for i in indices:
            while len(out) >= 2 and _cross(pts[out[-2]], pts[out[-1]], pts[i]) <= 0:
                out.pop()
            out.append(i)
        return out[:-1]

    hull = chain(order) + chain(order[::-1])
    start = hull.index(min(hull))
    return hull[start:] + hull[:start]


def _segments_meet(p1, p2, q1, q2):
    d1, d2 = _cross(q1, q2, p1), _cross(q1, q2, p2)
    d3, d4 = _cross(p1, p2, q1), _cross(p1, p2, q2)
    if ((d1 > _EPS and d2 < -_EPS) or (d1 < -_EPS and d2 > _EPS)) and (
        (d3 > _EPS and d4 < -_EPS) or (d3 < -_EPS and d4 > _EPS)
    ):
        return True

    def on(a, b, c):  # c on the segment ab (collinear case)
        return (
            min(a[0], b[0]) - _EPS <= c[0] <= max(a[0], b[0]) + _EPS
            and min(a[1], b[1]) - _EPS <= c[1] <= max(a[1], b[1]) + _EPS
        )

    return (
        (abs(d1) <= _EPS and on(q1, q2, p1))
        or (abs(d2) <= _EPS and on(q1, q2, p2))
        or (abs(d3) <= _EPS and on(p1, p2, q1))
        or (abs(d4) <= _EPS and on(p1, p2, q2))
    )


def is_simple_polygon(points, order):
    """3+ distinct vertices, non-zero area, no two non-adjacent edges meeting."""
    order = list(order)
    m = len(order)
    if m < 3 or len(set(order)) != m:
        return False
    p = np.asarray(points, np.float64)[order]
    if abs(signed_area(p, range(m))) <= _EPS:
        return False
    for a in range(m):
        for b in range(a + 1, m):
            if b == a + 1 or (a == 0 and b == m - 1):
                continue  # adjacent edges share a vertex
            if _segments_meet(p[a], p[(a + 1) % m], p[b], p[(b + 1) % m]):
                return False
    return True


# ------------------------------------------------------------------ tours


def distances(points):
    """Euclidean distances `(..., n, n)` in float64."""
    p = np.asarray(points, np.float64)
    return np.sqrt(((p[..., :, None, :] - p[..., None, :, :]) ** 2).sum(-1))


def tour_length(points, tour):
    """Length of the closed tour `points[tour]` (back to the first city)."""
    return float(tour_lengths(np.asarray(points)[None], np.asarray(tour)[None])[0])


def tour_lengths(points, tours):
    """Lengths `(B,)` of the closed tours `(B, n)` through `points` `(B, n, 2)`."""
    p = np.take_along_axis(np.asarray(points, np.float64), tours[..., None], axis=1)
    return np.sqrt(((p - np.roll(p, -1, axis=1)) ** 2).sum(-1)).sum(-1)


def counter_clockwise(points, tours):
    """`tours` `(B, n)` from their first city, each in its positive direction."""
    tours = np.array(tours)
    if tours.shape[1] < 3:
        return tours
    p = np.take_along_axis(np.asarray(points, np.float64), tours[..., None], axis=1)
    x, y = p[..., 0], p[..., 1]
    area = (x * np.roll(y, -1, axis=1) - np.roll(x, -1, axis=1) * y).sum(1)
    flip = area < 0
    tours[flip, 1:] = tours[flip, 1:][:, ::-1]
    return tours


def held_karp(points):
    """Optimal tours from city 0 by Held-Karp, vectorized over the batch.

    `dp[b, S, j]`: the shortest path from city 0 through the cities of the
    subset `S` of `{1..n-1}` (bit `k` is city `k + 1`), ending at city
    `j + 1`. Subsets are filled by size; the tour is read back from `dp`.
    Memory `O(B * 2^(n-1) * n)`: for `n <= ~13`, or one instance at `n = 20`.

    Args:
        points: `(B, n, 2)`.

    Returns:
        `(tours, lengths)`: int `(B, n)` starting with 0, counter-clockwise,
        and float64 `(B,)`.
    """
    points = np.asarray(points, np.float64)
    batch, n = points.shape[:2]
    if n <= 3:
        tours = np.tile(np.arange(n), (batch, 1))
        return counter_clockwise(points, tours), tour_lengths(points, tours)
    d = distances(points)
    m = n - 1
    full = (1 << m) - 1
    dp = np.full((batch, 1 << m, m), np.inf)
    for j in range(m):
        dp[:, 1 << j, j] = d[:, 0, j + 1]
    sizes = np.array([bin(s).count("1") for s in range(1 << m)])
    between = d[:, 1:, 1:]  # (B, m, m): from city k + 1 to city j + 1.
    for size in range(2, m + 1):
        subsets = np.flatnonzero(sizes == size)
        for j in range(m):
            sel = subsets[(subsets >> j) & 1 == 1]
            prev = dp[:, sel ^ (1 << j), :]  # (B, |sel|, m), inf off the subset.
            dp[:, sel, j] = (prev + between[:, None, :, j]).min(-1)
    rows = np.arange(batch)
    last = np.argmin(dp[:, full, :] + d[:, 1:, 0], axis=1)
    lengths = dp[rows, full, last] + d[rows, last + 1, 0]
    tours = np.zeros((batch, n), int)
    subset = np.full(batch, full)
    for position in range(m, 0, -1):
        tours[:, position] = last + 1
        if position == 1:
            break
        subset = subset ^ (1 << last)
        prev = dp[rows, subset, :] + between[rows, :, last]
        last = np.argmin(prev, axis=1)
    return counter_clockwise(points, tours), lengths


def brute_force_tsp(points):
    """The optimal tour length by trying every tour from city 0 (tests)."""
    n = len(points)
    return min(
        tour_length(points, (0, *p)) for p in itertools.permutations(range(1, n))
    )


@functools.lru_cache(maxsize=64)
def move_table(n, or_opt):
    """Every 2-opt move, and with `or_opt` every Or-opt move, on `n` cities.

    A move is the tour's new order of positions (position 0 stays first),
    with the edges it removes and adds as pairs of positions, padded to 3
    with the zero-length edge `(0, 0)`. 2-opt reverses a segment; Or-opt
    moves a segment of 1-3 consecutive cities (city 0's among them)
    elsewhere, in either direction. Moves that change no edge, and any that
    give a tour already listed, are left out.

    Returns:
        `(orders, removed, added)`: int `(M, n)`, `(M, 3, 2)` and `(M, 3, 2)`.
    """
    base = tuple(range(n))

    def edges(order):
        return {frozenset((order[k], order[(k + 1) % n])) for k in range(n)}

    base_edges = edges(base)
    candidates = [
        base[:i] + base[i : j + 1][::-1] + base[j + 1 :]
        for i in range(1, n - 1)
        for j in range(i + 1, n)
    ]
    # Or-opt on the cycle: a segment may hold position 0 (it wraps round);
    # each result is turned so that position 0 comes first again.
    for size in range(1, 4) if or_opt and n > 4 else ():
        for i in range(n):
            segment = tuple((i + k) % n for k in range(size))
            rest = tuple((i + size + k) % n for k in range(n - size))
            for k, piece in itertools.product(range(len(rest)), (1, -1)):
                order = rest[: k + 1] + segment[::piece] + rest[k + 1 :]
                first = order.index(0)
                candidates.append(order[first:] + order[:first])
    orders, removed, added, seen = [], [], [], set()
    for order in candidates:
        new_edges = frozenset(edges(order))
        if new_edges in seen or new_edges == base_edges:
            continue
        seen.add(new_edges)
        orders.append(order)
        for out, change in (
            (removed, base_edges - new_edges),
            (added, new_edges - base_edges),
        ):
            pairs = [tuple(sorted(e)) for e in change]
            out.append(pairs + [(0, 0)] * (3 - len(pairs)))
    table = np.array(orders), np.array(removed), np.array(added)
    for array in table:  # shared by every caller through the cache
        array.flags.writeable = False
    return table


def local_search(points, tours, or_opt=True):
    """Tours improved by the best 2-opt (and Or-opt) move until none improves.

    Args:
        points: `(B, n, 2)`.
        tours: int `(B, n)` starting tours, city 0 first.
        or_opt: Whether Or-opt moves are tried besides 2-opt.

    Returns:
        int `(B, n)`: a local optimum of each tour, city 0 still first.
    """
    tours = np.array(tours)
    if tours.shape[1] < 4:
        return tours
    orders, removed, added = move_table(tours.shape[1], or_opt)
    d = distances(points)
    active = np.arange(len(tours))
    while active.size:
        t, rows, near = tours[active], np.arange(active.size)[:, None, None], d[active]
        gain = near[rows, t[:, removed[..., 0]], t[:, removed[..., 1]]].sum(-1)
        gain -= near[rows, t[:, added[..., 0]], t[:, added[..., 1]]].sum(-1)
        best = gain.argmax(1)
        improves = gain[np.arange(active.size), best] > 1e-10
        active = active[improves]
        tours[active] = np.take_along_axis(t[improves], orders[best[improves]], 1)
    return tours


def nearest_neighbour_tours(points):
    """Tours `(B, n)` from city 0, each step to the nearest unvisited city."""
    d = distances(points)
    batch, n = d.shape[:2]
    rows = np.arange(batch)
    tours = np.zeros((batch, n), int)
    visited = np.zeros((batch, n), bool)
    visited[:, 0] = True
    for step in range(1, n):
        near = np.where(visited, np.inf, d[rows, tours[:, step - 1]])
        tours[:, step] = near.argmin(1)
        visited[rows, tours[:, step]] = True
    return tours


def tsp_targets(points, labels="or-opt", starts=5, seed=0):
    """Reference tours `(B, n)` and their lengths.

    Held-Karp's optimum up to `HELD_KARP_MAX_N` cities; above, a local
    search:

    * `"2-opt"`: 2-opt from the nearest-neighbour tour (the heuristic the
      first Ptr-Net runs trained on);
    * `"or-opt"`: 2-opt and Or-opt from `starts` random tours, the shortest
      kept. The starts come from a generator of their own, seeded with
      `(seed, 1)`, never the same numbers as points made with `seed`.
    """
    points = np.asarray(points)
    if labels not in TSP_LABELS:
        raise ValueError(
            f"`labels` must be one of {TSP_LABELS}. Received: labels={labels!r}"
        )
    if starts < 1:
        raise ValueError(f"`starts` must be at least 1. Received: starts={starts}")
    batch, n = points.shape[:2]
    if n <= HELD_KARP_MAX_N:
        chunks = np.array_split(points, max(1, batch // 2000))
        parts = [held_karp(chunk) for chunk in chunks]
        tours, lengths = zip(*parts, strict=True)
        return np.concatenate(tours), np.concatenate(lengths)
    rng = np.random.default_rng((seed, 1))
    # Chunks: the search's gathers are `(instances, moves, 3)`.
    tours = np.concatenate(
        [
            _searched_tours(chunk, labels, starts, rng)
            for chunk in np.array_split(points, max(1, -(-batch // 500)))
        ]
    )
    return counter_clockwise(points, tours), tour_lengths(points, tours)


def _searched_tours(points, labels, starts, rng):
    if labels == "2-opt":
        return local_search(points, nearest_neighbour_tours(points), or_opt=False)
    batch, n = points.shape[:2]
    tours, best = None, np.full(batch, np.inf)
    for _ in range(starts):
        start = 1 + np.argsort(rng.random((batch, n - 1)), axis=1)
        found = local_search(points, np.pad(start, ((0, 0), (1, 0))), or_opt=True)
        lengths = tour_lengths(points, found)
        better = lengths < best
        tours = found if tours is None else np.where(better[:, None], found, tours)
        best = np.minimum(best, lengths)
    return tours


# ------------------------------------------------------------------ splits


def make_split(task, sizes, num, seed, labels="or-opt"):
    """`num` examples split evenly over `sizes`: [(points, target lists)].

    `labels`: how TSP tours above `HELD_KARP_MAX_N` cities are found (see
    `tsp_targets`). Each group: `n`, `points`, `targets` (index lists),
    TSP's reference lengths `ref` and their kind `reference` ("optimal" or
    the labels' local search).
    """
    groups = []
    for k, n in enumerate(sizes):
        count = num // len(sizes) + (k < num % len(sizes))
        if count == 0:
            continue
        points = make_points(count, n, seed * 1000 + n)
        if task == "hull":
            targets = [convex_hull(p) for p in points]
            reference, kind = None, None
        else:
            tours, reference = tsp_targets(points, labels, seed=seed * 1000 + n)
            kind = "optimal" if n <= HELD_KARP_MAX_N else labels
            targets = [list(t) for t in tours]
        groups.append(
            {
                "n": n,
                "points": points,
                "targets": targets,
                "ref": reference,
                "reference": kind,
            }
        )
    return groups
