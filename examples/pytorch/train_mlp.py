"""A plain PyTorch loop with joulepipe: energy per iteration, and in
optimize mode a clock per forward/backward.

Runs on a CPU with joulepipe's simulated GPUs:

    LD_LIBRARY_PATH=$(python -m joulepipe.sim_nvml) \\
    JOULEPIPE_SIM_NVML_CONFIG=examples/pytorch/sim-gpu.json \\
        python examples/pytorch/train_mlp.py --joulepipe optimize

Each iteration runs `--microbatches` forwards and backwards (gradient
accumulation), then the optimizer step: the order of a one-stage 1F1B
schedule, which is what the plan is made for.
"""

import argparse

import torch

import joulepipe.pytorch as jp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--joulepipe", choices=["measure", "profile", "optimize"],
                        default="measure")
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--batch", type=int, default=64, help="samples per microbatch")
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--profile-stride-mhz", type=int, default=90,
                        help="profile every N MHz (0: every supported clock)")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(args.width, args.width), torch.nn.GELU(),
                                torch.nn.Linear(args.width, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = torch.randn(args.microbatches, args.batch, args.width)
    target = torch.randn(args.microbatches, args.batch, 1)

    energy = jp.Energy(args.joulepipe, microbatches=args.microbatches,
                       tokens_per_iteration=args.microbatches * args.batch,
                       profile_stride_mhz=args.profile_stride_mhz, log=print)
    with energy:
        for step in range(args.iterations):
            with energy.iteration():
                optimizer.zero_grad()
                total = 0.0
                for mb in range(args.microbatches):
                    with energy.forward(mb):
                        loss = torch.nn.functional.mse_loss(model(data[mb]), target[mb])
                    with energy.backward(mb):
                        loss.backward()
                    total += loss.item()
                energy.pipeline_done()
                optimizer.step()
            print(f"iteration {step} | loss {total / args.microbatches:.6f}")


if __name__ == "__main__":
    main()
