"""What joulepipe's Python hooks cost the training thread: a forward/backward
context of joulepipe.pytorch.Energy, against the same loop without it,
measured in the same run. Target: < 5 us per hook.

    PYTHONPATH=build/python python3 bench/python_hooks.py

Re-runs itself against the simulated NVML library (build/sim-nvml) so that
the optimize case runs a real Agent executing a plan: every instruction asks
the controller thread for a clock (the simulated library's clock calls are
those of a driver, not free, but they run on the controller, not here).

Per case: BATCHES batches of CALLS contexts; the per-context time of each
batch, with the empty loop's time per iteration subtracted; median and p99
over the batches.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("JOULEPIPE_BUILD_DIR", REPO / "build"))
CALLS = 1000
BATCHES = 300


def per_call_ns(body, calls=CALLS, batches=BATCHES):
    out = []
    for _ in range(batches):
        t0 = time.perf_counter_ns()
        body(calls)
        out.append((time.perf_counter_ns() - t0) / calls)
    return out


def summary(samples, baseline):
    base = statistics.median(baseline)
    net = sorted(s - base for s in samples)
    return statistics.median(net), net[int(0.99 * (len(net) - 1))]


def main():
    import joulepipe as jp
    import joulepipe.pytorch as jpt

    F, B = jp.Kind.FORWARD, jp.Kind.BACKWARD

    def empty(n):
        for mb in range(n):
            pass

    def contexts(energy):
        def run(n):
            for mb in range(n):
                with energy.forward(0):
                    pass
        return run

    def native(agent):
        def run(n):
            begin, end = agent.on_instruction_begin, agent.on_instruction_end
            for mb in range(n):
                begin(F, 0, 0)
                end(F, 0, 0)
        return run

    rows = []
    baseline = per_call_ns(empty)
    rows.append(("empty loop (baseline)", statistics.median(baseline), None))

    quiet = lambda line: None  # noqa: E731
    measure = jpt.Energy("measure", log=quiet)
    with measure.step():
        med, p99 = summary(per_call_ns(contexts(measure)), baseline)
    rows.append(("measure: with energy.forward()", med, p99))
    measure.close()

    # optimize: a one-stage plan of CALLS/2 microbatches (F0 B0 F1 B1 ...),
    # so one step holds a batch of CALLS instructions, each planned.
    tmp = Path(tempfile.mkdtemp())
    m = CALLS // 2
    order = [(k, i) for i in range(m) for k in ("forward", "backward")]
    plan = {"version": 1, "schedule": "1f1b", "num_stages": 1, "num_microbatches": m,
            "num_chunks": 1,
            "stages": [[{"instruction": k, "microbatch": i, "chunk": 0,
                         "frequency": 1200 if k == "forward" else 1005} for k, i in order]]}
    (tmp / "chosen.json").write_text(json.dumps(plan))
    stage_plan = [(F if k == "forward" else B, i, 0, 1200 if k == "forward" else 1005)
                  for k, i in order]

    agent = jp.Agent(nvml_index=jp.gpus()[0]["nvml_index"], control="nvml")
    agent.set_plan(stage_plan)

    def native_step(n):
        begin, end = agent.on_instruction_begin, agent.on_instruction_end
        agent.on_step_begin()
        for i in range(n // 2):
            begin(F, i, 0)
            end(F, i, 0)
            begin(B, i, 0)
            end(B, i, 0)
        agent.on_step_end()

    med, p99 = summary(per_call_ns(native_step), baseline)
    rows.append(("optimize: native agent begin+end per instruction", med, p99))
    assert agent.mode == "execute", agent.fallback_reason
    agent.close()

    energy = jpt.Energy("optimize", plan=str(tmp), microbatches=m, log=quiet)
    step_ns = []

    def context_step(n):
        t0 = time.perf_counter_ns()
        with energy.step():
            t1 = time.perf_counter_ns()
            for i in range(n // 2):
                with energy.forward(i):
                    pass
                with energy.backward(i):
                    pass
            t2 = time.perf_counter_ns()
        step_ns.append((time.perf_counter_ns() - t2) + (t1 - t0))

    samples = per_call_ns(context_step)
    assert energy.failure is None, energy.failure
    # Take the step's own hooks out: what is left is the contexts.
    per_step = statistics.median(step_ns)
    med, p99 = summary([s - per_step / CALLS for s in samples], baseline)
    rows.append(("optimize: with energy.forward()/backward(), per context", med, p99))
    rows.append(("optimize: energy.step() begin+end (NVML energy reads, record), per step",
                 per_step, sorted(step_ns)[int(0.99 * (len(step_ns) - 1))]))
    energy.close()

    print(f"joulepipe Python hook cost, {BATCHES} batches x {CALLS} calls "
          "(ns per call, the empty loop's time subtracted)")
    print(f"{'case':72s} {'median':>9s} {'p99':>9s}")
    for name, med, p99 in rows:
        print(f"{name:72s} {med:9.0f} {'' if p99 is None else f'{p99:9.0f}'}")
    print("target: < 5000 ns per hook (a forward or backward context is two hooks: begin, end)")


if __name__ == "__main__":
    if os.environ.get("JOULEPIPE_BENCH_CHILD") != "1":
        config = Path(tempfile.mkdtemp()) / "sim.json"
        config.write_text(json.dumps({"gpu": "a100-sxm4-80gb", "permissions": {"clocks": True},
                                      "load": [{"start_s": -1e9, "end_s": 1e9}]}))
        env = dict(os.environ, JOULEPIPE_BENCH_CHILD="1", JOULEPIPE_SIM_NVML_CONFIG=str(config),
                   LD_LIBRARY_PATH=f"{BUILD / 'sim-nvml'}:{os.environ.get('LD_LIBRARY_PATH', '')}",
                   PYTHONPATH=f"{BUILD / 'python'}:{os.environ.get('PYTHONPATH', '')}")
        sys.exit(subprocess.run([sys.executable, __file__], env=env, timeout=600).returncode)
    main()
