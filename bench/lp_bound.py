#!/usr/bin/env python3
"""Independent check of the relaxation bound printed by bench_perseus_table.

Solves the project time-cost LP directly with SciPy's HiGHS (no code shared
with the C++ solver): every instruction of an 8-stage 1F1B iteration may take
any duration on the lower convex hull of its (time, energy - P_block * time)
points; minimise total energy with the iteration no slower than with every
instruction at its highest clock. Prints the bound's saving in percent for the
16 Perseus configurations. Needs numpy and scipy (pip install scipy).

Usage: python3 bench/lp_bound.py [microbatches ...]
"""
import collections
import pathlib
import sys

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import lil_matrix

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from perseus_inputs import load_profile, one_f_one_b  # noqa: E402

PROFILES = pathlib.Path(__file__).resolve().parent.parent / "data" / "profiles"
WORKLOADS = [("GPT-3 A100-SXM", "gpt3-175b+a100_sxm_bf16.csv", 83.64),
             ("GPT-3 A40", "gpt3-175b+a40_bf16.csv", 70.38),
             ("BLOOM A100-SXM", "bloom+a100_sxm_bf16.csv", 83.64),
             ("BLOOM A40", "bloom+a40_bf16.csv", 70.38)]
STAGES = 8


def lower_hull(points):
    """Lower convex hull of (time, cost), fastest point to cheapest point."""
    hull = []
    for p in sorted(points):
        while len(hull) >= 2 and ((hull[-1][0] - hull[-2][0]) * (p[1] - hull[-2][1]) -
                                  (hull[-1][1] - hull[-2][1]) * (p[0] - hull[-2][0])) <= 0:
            hull.pop()
        hull.append(p)
    cheapest = min(range(len(hull)), key=lambda i: hull[i][1])
    return hull[:cheapest + 1]


def bound_saving(path, p_block, microbatches):
    prof = load_profile(path)
    orders = one_f_one_b(STAGES, microbatches)
    nodes = [(s, k, m) for s in range(STAGES) for (k, m) in orders[s]]
    index = {n: i for i, n in enumerate(nodes)}
    n = len(nodes)
    edges = []
    for s in range(STAGES):
        for a, b in zip(orders[s], orders[s][1:]):
            edges.append((index[(s,) + a], index[(s,) + b]))
    for m in range(microbatches):
        for s in range(STAGES - 1):
            edges.append((index[(s, "forward", m)], index[(s + 1, "forward", m)]))
            edges.append((index[(s + 1, "backward", m)], index[(s, "backward", m)]))
    top = {k: max(v) for k, v in prof.items()}
    # Baseline: every instruction at its highest clock; longest path by Kahn.
    succ = collections.defaultdict(list)
    indegree = [0] * n
    for a, b in edges:
        succ[a].append(b)
        indegree[b] += 1
    ready = [i for i in range(n) if indegree[i] == 0]
    start, finish = [0.0] * n, [0.0] * n
    durations = [top[(s, k)][1] for (s, k, m) in nodes]
    while ready:
        i = ready.pop()
        finish[i] = start[i] + durations[i]
        for j in succ[i]:
            start[j] = max(start[j], finish[i])
            indegree[j] -= 1
            if indegree[j] == 0:
                ready.append(j)
    deadline = max(finish)
    baseline = sum(top[(s, k)][2] for (s, k, m) in nodes) + p_block * (STAGES * deadline - sum(durations))
    hulls = {k: lower_hull([(t, e - p_block * t) for _, t, e in v]) for k, v in prof.items()}
    # Variables: duration d_i, start s_i, epigraph z_i of the hull cost.
    rows = len(edges) + n + sum(max(1, len(hulls[(s, k)]) - 1) for (s, k, m) in nodes)
    a = lil_matrix((rows, 3 * n))
    b = []
    r = 0
    for u, v in edges:  # s_u + d_u - s_v <= 0
        a[r, n + u], a[r, u], a[r, n + v] = 1, 1, -1
        b.append(0)
        r += 1
    for i in range(n):  # s_i + d_i <= deadline
        a[r, n + i], a[r, i] = 1, 1
        b.append(deadline)
        r += 1
    for i, (s, k, m) in enumerate(nodes):
        h = hulls[(s, k)]
        if len(h) == 1:
            a[r, 2 * n + i] = -1
            b.append(-h[0][1])
            r += 1
        for (t0, c0), (t1, c1) in zip(h, h[1:]):  # z >= c0 + slope (d - t0)
            slope = (c1 - c0) / (t1 - t0)
            a[r, i], a[r, 2 * n + i] = slope, -1
            b.append(slope * t0 - c0)
            r += 1
    cost = np.zeros(3 * n)
    cost[2 * n:] = 1
    bounds = ([(hulls[(s, k)][0][0], hulls[(s, k)][-1][0]) for (s, k, m) in nodes] +
              [(0, None)] * n + [(None, None)] * n)
    res = linprog(cost, A_ub=a[:r].tocsr(), b_ub=b, bounds=bounds, method="highs")
    if res.status != 0:
        raise RuntimeError(f"{path.name} M={microbatches}: {res.message}")
    return 100 * (1 - (res.fun + STAGES * p_block * deadline) / baseline)


def main():
    counts = [int(x) for x in sys.argv[1:]] or [12, 24, 48, 96]
    print("relaxation bound, zero-slowdown saving (SciPy HiGHS LP, independent of the C++ solver)")
    for label, name, p_block in WORKLOADS:
        figures = [bound_saving(PROFILES / name, p_block, m) for m in counts]
        print(f"{label:15s} " + "  ".join(f"M={m}: {x:6.2f}%" for m, x in zip(counts, figures)))


if __name__ == "__main__":
    main()
