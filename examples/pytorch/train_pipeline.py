"""A two-stage pipeline-parallel PyTorch loop with joulepipe: one rank per
stage, activations and gradients sent point to point, the 1F1B order.

On a CPU, with joulepipe's simulated GPUs (docs/python.md):

    export LD_LIBRARY_PATH=$(python -m joulepipe.sim_nvml)
    export JOULEPIPE_SIM_NVML_CONFIG=examples/pytorch/sim-gpu.json
    # 1. energy per iteration, clocks untouched
    torchrun --nproc-per-node 2 examples/pytorch/train_pipeline.py --joulepipe measure
    # 2. the in-situ profile (a sweep of SM clocks in the first iterations)
    torchrun --nproc-per-node 2 examples/pytorch/train_pipeline.py --joulepipe profile \\
        --profile-out pipeline.csv
    # 3. plan it, then train with a clock per forward/backward
    joulepipe plan --profile pipeline.csv --schedule 1f1b --stages 2 --microbatches 4 \\
        --out pipeline-plan
    torchrun --nproc-per-node 2 examples/pytorch/train_pipeline.py --joulepipe optimize \\
        --plan pipeline-plan

Stage 0 holds the first half of an MLP, stage 1 the second half and the loss.
Each iteration runs --microbatches forwards and backwards per stage in the
1F1B order (stage 0: one forward ahead, then one forward and one backward in
turn; stage 1: forward and backward in turn), then the optimizer step.
"""

import argparse
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

import joulepipe.pytorch as jp

STAGES = 2


def one_f_one_b(stage, microbatches):
    """This stage's order of ("forward" | "backward", microbatch): 1F1B."""
    warmup = min(STAGES - stage - 1, microbatches)
    order = [("forward", m) for m in range(warmup)]
    for i in range(microbatches - warmup):
        order += [("forward", warmup + i), ("backward", i)]
    order += [("backward", m) for m in range(microbatches - warmup, microbatches)]
    return order


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--joulepipe", choices=["measure", "profile", "optimize"],
                        default="measure", help="what joulepipe does (default: measure)")
    parser.add_argument("--plan", help="optimize: a plan file or `joulepipe plan --out` DIR")
    parser.add_argument("--profile-out", help="profile: where rank 0 writes the profile CSV")
    parser.add_argument("--power-trace",
                        help="each rank's GPU power over time into this file ({rank} replaced); "
                             "join them: joulepipe power --join")
    parser.add_argument("--power-trace-s", type=float, default=60,
                        help="how long the power trace records (default 60 s)")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--batch", type=int, default=64, help="samples per microbatch")
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--profile-stride-mhz", type=int, default=135,
                        help="profile: every N MHz of the supported clocks (0: all)")
    parser.add_argument("--timeout-s", type=float, default=60,
                        help="gloo timeout for every send/receive")
    args = parser.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout_s))
    rank = dist.get_rank()
    if dist.get_world_size() != STAGES:
        sys.exit(f"run with torchrun --nproc-per-node {STAGES} (one rank per stage)")
    torch.manual_seed(rank)
    w, b, m = args.width, args.batch, args.microbatches
    if rank == 0:
        model = torch.nn.Sequential(torch.nn.Linear(w, w), torch.nn.GELU(),
                                    torch.nn.Linear(w, w), torch.nn.GELU())
    else:
        model = torch.nn.Sequential(torch.nn.Linear(w, w), torch.nn.GELU(),
                                    torch.nn.Linear(w, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = torch.randn(m, b, w)
    target = torch.randn(m, b, 1)

    def say(line):
        # One write per line, so that the ranks' lines never interleave on a shared pipe.
        sys.stdout.write(f"[rank {rank}] {line}\n")
        sys.stdout.flush()

    options = {}
    if args.plan:
        options["plan"] = args.plan
    if args.profile_out:
        options["profile_out"] = args.profile_out
    if args.power_trace:
        options.update(power_trace=args.power_trace, power_trace_s=args.power_trace_s)
    energy = jp.Energy(args.joulepipe, schedule="1f1b", microbatches=m, pp=STAGES,
                       pp_rank=rank, dp=1, dp_rank=0, tokens_per_iteration=m * b,
                       profile_stride_mhz=args.profile_stride_mhz,
                       log=say, **options)
    with energy:
        for step in range(args.iterations):
            with energy.step():
                optimizer.zero_grad()
                inputs, outputs, sends = {}, {}, []
                total = 0.0
                for kind, mb in one_f_one_b(rank, m):
                    # Communication stays outside the instruction contexts: a
                    # forward/backward is this stage's computation, which is
                    # what its clock changes (waits are the schedule's).
                    if kind == "forward":
                        if rank == 0:
                            x = data[mb]
                        else:
                            x = torch.empty(b, w)
                            dist.recv(x, src=0)
                            x.requires_grad_()
                        with energy.forward(mb):
                            y = model(x)
                            if rank == STAGES - 1:
                                y = torch.nn.functional.mse_loss(y, target[mb])
                        if rank == 0:
                            sends.append(dist.isend(y.detach(), dst=1))
                        else:
                            total += y.item()
                        inputs[mb], outputs[mb] = x, y
                    else:
                        if rank == 0:
                            grad = torch.empty(b, w)
                            dist.recv(grad, src=1)
                        with energy.backward(mb):
                            if rank == 0:
                                outputs.pop(mb).backward(grad)
                            else:
                                outputs.pop(mb).backward()
                        if rank == STAGES - 1:
                            sends.append(dist.isend(inputs[mb].grad, dst=0))
                        inputs.pop(mb)
                for s in sends:
                    s.wait()
                energy.pipeline_done()
                optimizer.step()
            if rank == STAGES - 1:
                say(f"iteration {step} | loss {total / m:.6f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
