#!/usr/bin/env python3
"""joulepipe's frontier planner against lowtime 0.3.0 (Perseus's solver) on
the same input: a measured Perseus stage profile, synchronous 1F1B, S stages
x M microbatches, P_block as Perseus uses it.

Both compute the WHOLE iteration time-energy frontier:
  * lowtime: Phillips-Dessouky on an exponential cost model fitted per
    (stage, kind), time quantised to Perseus's 1 ms unit, effective energy
    (energy - P_block x time) as the cost, as Perseus's optimizer does
    (docs/solver.md); timed from the DAG build through the last iteration;
  * joulepipe: `joulepipe plan` on the same profile (exact relaxation plus
    rounding on a 1 ms grid); its solve time from summary.json, and the
    command's whole wall time.

Prints medians over --repeat runs and the ratio lowtime / joulepipe; lowtime
runs in a child process stopped after --lowtime-limit-s (600 s) and is
repeated only while it finishes (a stopped run prints the limit as a lower
bound and the iterations it reached).
Usage: bench/lowtime_compare.py [--joulepipe build/joulepipe] [--profile CSV]
       [--p-block W] [--stages S] [--microbatches M ...] [--repeat N]
       [--lowtime-limit-s S]
Needs: pip install lowtime==0.3.0 (and networkx, numpy, scipy it brings).
"""
import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from perseus_inputs import load_profile, one_f_one_b  # noqa: E402


def run_lowtime(profile, p_block, stages, microbatches, unit=1e-3, counter=None):
    import networkx as nx
    from lowtime.cost_model import ExponentialModel
    from lowtime.graph_utils import add_sink_node, add_source_node, relabel_nodes_to_int
    from lowtime.operation import CandidateExecutionOptions, ExecutionOption, OperationSpec
    from lowtime.perseus.instruction import Backward, Forward
    from lowtime.solver import PhillipsDessouky

    start = time.perf_counter()
    specs = {}
    for (stage, kind), points in profile.items():
        options = CandidateExecutionOptions(options=[
            ExecutionOption(real_time=t, unit_time=unit, cost=e - p_block * t, knob=mhz)
            for mhz, t, e in points])
        specs[(stage, kind)] = OperationSpec(options=options, cost_model=ExponentialModel(options))
    dag = nx.DiGraph()
    cls = {"forward": Forward, "backward": Backward}
    for s, seq in enumerate(one_f_one_b(stages, microbatches)):
        previous = None
        for kind, m in seq:
            node = (s, kind, m)
            dag.add_node(node, op=cls[kind](spec=specs[(s, kind)], stage_id=s, micro_batch_id=m))
            if previous is not None:
                dag.add_edge(previous, node)
            previous = node
    for s in range(stages):
        for m in range(microbatches):
            if s + 1 < stages:
                dag.add_edge((s, "forward", m), (s + 1, "forward", m))
                dag.add_edge((s + 1, "backward", m), (s, "backward", m))
    for m in range(microbatches):
        dag.add_edge((stages - 1, "forward", m), (stages - 1, "backward", m))
    add_source_node(dag, "source")
    add_sink_node(dag, "sink")
    dag.graph["source_node"] = "source"
    dag.graph["sink_node"] = "sink"
    dag, _ = relabel_nodes_to_int(dag)
    iterations = 0
    for _ in PhillipsDessouky(dag).run():
        iterations += 1
        if counter is not None:
            counter.value = iterations
    return time.perf_counter() - start, iterations


def run_lowtime_limited(profile, p_block, stages, microbatches, limit_s):
    """run_lowtime in a child process, stopped after limit_s: (seconds,
    iterations, finished)."""
    counter = multiprocessing.Value("q", 0)
    result = multiprocessing.Queue()

    def child():
        result.put(run_lowtime(profile, p_block, stages, microbatches, counter=counter))

    proc = multiprocessing.Process(target=child, daemon=True)
    start = time.perf_counter()
    proc.start()
    proc.join(limit_s)
    if proc.is_alive():
        proc.terminate()
        proc.join()
        return time.perf_counter() - start, counter.value, False
    seconds, iterations = result.get(timeout=10)
    return seconds, iterations, True


def run_joulepipe(binary, profile_path, p_block, stages, microbatches):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "plan")
        start = time.perf_counter()
        subprocess.run([binary, "plan", "--profile", profile_path, "--schedule", "1f1b",
                        "--stages", str(stages), "--microbatches", str(microbatches),
                        "--p-block", str(p_block), "--out", out],
                       check=True, capture_output=True, timeout=600)
        wall = time.perf_counter() - start
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        with open(os.path.join(out, "frontier.csv")) as f:
            points = sum(1 for _ in f) - 1
    return summary["solve_seconds"], wall, points


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--joulepipe", default=os.path.join(ROOT, "build", "joulepipe"))
    parser.add_argument("--profile",
                        default=os.path.join(ROOT, "data/profiles/gpt3-175b+a100_sxm_bf16.csv"))
    parser.add_argument("--p-block", type=float, default=83.64,
                        help="P2P-blocking power (W); Perseus's A100 figure by default")
    parser.add_argument("--stages", type=int, default=8)
    parser.add_argument("--microbatches", type=int, nargs="+", default=[12, 24])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--lowtime-limit-s", type=float, default=600,
                        help="stop lowtime after this long (it takes minutes to hours)")
    args = parser.parse_args()
    try:
        import lowtime  # noqa: F401
    except ImportError:
        sys.exit("bench/lowtime_compare.py: needs lowtime: pip install lowtime==0.3.0")
    profile = load_profile(args.profile)
    print(f"full frontier, {os.path.basename(args.profile)}, 1F1B, P_block {args.p_block} W, "
          f"median of {args.repeat}")
    print(f"{'S x M':>7} {'lowtime_s':>10} {'iters':>6} {'joulepipe_solve_s':>18} "
          f"{'joulepipe_cmd_s':>16} {'points':>7} {'ratio(solve)':>13} {'ratio(cmd)':>11}")
    for m in args.microbatches:
        jp = [run_joulepipe(args.joulepipe, args.profile, args.p_block, args.stages, m)
              for _ in range(args.repeat)]
        solve = statistics.median(x[0] for x in jp)
        cmd = statistics.median(x[1] for x in jp)
        # lowtime: stopped at the limit; repeated only while it finishes.
        lt = [run_lowtime_limited(profile, args.p_block, args.stages, m, args.lowtime_limit_s)]
        while lt[0][2] and len(lt) < args.repeat:
            lt.append(run_lowtime_limited(profile, args.p_block, args.stages, m,
                                          args.lowtime_limit_s))
        if not lt[0][2]:
            limit = args.lowtime_limit_s
            print(f"{args.stages:>3} x {m:<3} {'>' + format(limit, 'g'):>10} {lt[0][1]:6d} "
                  f"{solve:18.3f} {cmd:16.3f} {jp[0][2]:7d} "
                  f"{'>' + format(limit / solve, '.0f'):>12}x {'>' + format(limit / cmd, '.0f'):>10}x"
                  f"  (lowtime stopped at the limit after {lt[0][1]} iterations)", flush=True)
            continue
        lt_s = statistics.median(x[0] for x in lt)
        print(f"{args.stages:>3} x {m:<3} {lt_s:10.2f} {lt[0][1]:6d} {solve:18.3f} {cmd:16.3f} "
              f"{jp[0][2]:7d} {lt_s / solve:12.0f}x {lt_s / cmd:10.0f}x", flush=True)


if __name__ == "__main__":
    main()
