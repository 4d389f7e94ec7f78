"""What the Python benchmarks read and build the same way (lp_bound.py,
lowtime_compare.py): a Perseus/Zeus stage profile CSV and the synchronous
1F1B order of each stage, written independently of the C++ solver."""
import collections
import csv


def load_profile(path):
    """{(stage, "forward"|"backward"): [(mhz, time_s, energy_j), ...]}"""
    prof = collections.defaultdict(list)
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            prof[(int(r["stage"]), r["instruction"])].append(
                (int(float(r["frequency"])), float(r["time"]), float(r["energy"])))
    return prof


def one_f_one_b(stages, microbatches):
    """Per stage, the synchronous 1F1B order: [(kind, microbatch), ...]:
    min(S - s - 1, M) warm-up forwards, then one forward and one backward
    at a time, then the remaining backwards."""
    orders = []
    for s in range(stages):
        warmup = min(stages - s - 1, microbatches)
        order = [("forward", m) for m in range(warmup)]
        f, b = warmup, 0
        while b < microbatches:
            if f < microbatches:
                order.append(("forward", f))
                f += 1
            order.append(("backward", b))
            b += 1
        orders.append(order)
    return orders
