"""The tiny GPT example (examples/megatron/train_tiny_gpt.py) driven the way
Megatron-LM's ``train()`` drives an iteration, for tests: with the
``megatron.training`` stand-in (megatron_lm_standin/) on the path it sets
``args.curr_iteration`` before each training schedule call (counting on from
--resume-at, as after --load), reads --log-interval, grows the number of
microbatches through --rampup (Megatron's batch-size rampup), saves a
checkpoint after every --save-every iterations through the stand-in's
``training.save_checkpoint_and_time``, and records what is written to its
TensorBoard writer into --scalars (JSON lines). Every other flag is the
example's.

    torchrun --nproc-per-node 2 megatron_lm_loop.py --resume-at 5 --log-interval 2 \\
        --rampup 2,4 --scalars s.jsonl --pp 2 --iterations 4 --joulepipe measure
"""
import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples" / "megatron"))

import train_tiny_gpt as tiny  # noqa: E402
from megatron.training import global_vars  # noqa: E402  (the stand-in)
from megatron.training import training  # noqa: E402  (the stand-in)

ours = argparse.ArgumentParser(add_help=False)
ours.add_argument("--resume-at", type=int, default=0)
ours.add_argument("--log-interval", type=int, default=1)
ours.add_argument("--rampup", default="", help="microbatches of the first iterations, e.g. 2,4")
ours.add_argument("--scalars", default=None)
ours.add_argument("--save-every", type=int, default=0)
options, sys.argv[1:] = ours.parse_known_args()
global_vars.ARGS.log_interval = options.log_interval
ramp = [int(n) for n in options.rampup.split(",") if n]
if ramp:
    # What Megatron-LM's arguments say of a rampup: the final global batch
    # and a --rampup-batch-size; joulepipe reads the final batch from them.
    example_args = tiny.build_parser().parse_known_args()[0]
    dp = 1  # the tests run pipeline parallelism only
    global_vars.ARGS.rampup_batch_size = [ramp[0], 1, 1]
    global_vars.ARGS.micro_batch_size = example_args.micro_batch_size
    global_vars.ARGS.global_batch_size = example_args.microbatches * example_args.micro_batch_size * dp


class Recorder:
    def __init__(self, path):
        self.path = path

    def add_scalar(self, tag, value, step):
        with open(self.path, "a") as f:
            f.write(json.dumps({"tag": tag, "value": value, "step": step}) + "\n")


if options.scalars:
    global_vars.TENSORBOARD = Recorder(options.scalars.replace("{rank}", os.environ.get("RANK", "0")))

make_microbatches = tiny.synthetic_microbatches


def training_iteration(args, kind, iteration, dp_rank, device):
    """Called once per schedule call, before it (iteration counts from 1)."""
    if kind == "train":
        done = options.resume_at + iteration - 1  # Megatron's number of the iteration before
        if options.save_every and iteration > 1 and done % options.save_every == 0:
            # After the iteration before and its evaluation, as in train();
            # looked up through the module, as train() does.
            training.save_checkpoint_and_time(done)
        global_vars.ARGS.curr_iteration = done
        if not hasattr(args, "final_microbatches"):
            args.final_microbatches = args.microbatches
        args.microbatches = (ramp[iteration - 1] if iteration <= len(ramp)
                             else args.final_microbatches)
    return make_microbatches(args, kind, iteration, dp_rank, device)


tiny.synthetic_microbatches = training_iteration
tiny.main()
