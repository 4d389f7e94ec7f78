"""Trains a tiny GPT with unmodified megatron-core 0.16.1 pipeline schedules,
optionally under joulepipe (joulepipe.megatron), on CPU or GPUs.

    OMP_NUM_THREADS=1 torchrun --nproc-per-node 2 --standalone \\
        examples/megatron/train_tiny_gpt.py --pp 2 --vp 2 --iterations 5

World size = pp * dp (tensor parallel is 1). The schedule megatron picks
follows from the layout: no pipelining (pp 1), 1F1B (pp 2) or interleaved
1F1B (pp 2, --vp > 1 model chunks per stage).

The loop is the minimal one megatron.training would run: per iteration
zero_grad, forward_backward_func over --microbatches microbatches, a
gradient all-reduce over the data-parallel group (done here by hand, see
allreduce_data_parallel_grads), and an SGD step. Data are synthetic and
deterministic: every run of the same configuration sees the same tokens, and
with OMP_NUM_THREADS=1 on CPU the losses are bit-identical between runs.

Without a GPU (--device cpu, the default when CUDA is unavailable) the CPU
shims of cpu_shims.py are installed; they are for this example and the tests,
never for real training. See docs/megatron.md.
"""

import argparse
import contextlib
import json
import os
import sys
import time
from datetime import timedelta
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist

from megatron.core import parallel_state
from megatron.core.models.gpt import GPTModel
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.core.pipeline_parallel import get_forward_backward_func
from megatron.core.transformer.transformer_config import TransformerConfig


def import_joulepipe():
    """Returns (joulepipe.megatron or None, why it is not importable)."""
    try:
        import joulepipe.megatron as jpm
    except ImportError as e:  # the package, its native module or the integration is absent
        return None, f"{type(e).__name__}: {e}"
    return jpm, None


def build_parser():
    p = argparse.ArgumentParser(
        description="Train a tiny GPT with megatron-core pipeline schedules (run under torchrun; "
        "world size = pp * data-parallel size, tensor parallel is 1).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--pp", type=int, choices=[1, 2], default=1,
                   help="pipeline-parallel size (stages)")
    p.add_argument("--vp", type=int, default=1,
                   help="virtual pipeline chunks per stage; > 1 selects the interleaved 1F1B "
                   "schedule (needs --pp 2)")
    p.add_argument("--microbatches", type=int, default=4,
                   help="microbatches per iteration (interleaved: a multiple of --pp)")
    p.add_argument("--micro-batch-size", type=int, default=2, help="sequences per microbatch")
    p.add_argument("--seq-length", type=int, default=32, help="tokens per sequence")
    p.add_argument("--hidden-size", type=int, default=64, help="transformer hidden size")
    p.add_argument("--num-heads", type=int, default=4, help="attention heads")
    p.add_argument("--layers", type=int, default=4,
                   help="transformer layers in total (divisible by pp * vp)")
    p.add_argument("--vocab-size", type=int, default=128, help="vocabulary size")
    p.add_argument("--iterations", type=int, default=5, help="training iterations")
    p.add_argument("--eval-every", type=int, default=0,
                   help="run a forward-only evaluation pass (same forward_backward_func, "
                   "forward_only=True) after every K-th iteration; 0 = never")
    p.add_argument("--lr", type=float, default=0.05, help="SGD learning rate")
    p.add_argument("--seed", type=int, default=1234, help="seed for weights and data")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="cpu: gloo and the CPU shims (cpu_shims.py); cuda: NCCL, one GPU per "
                   "local rank; auto: cuda when available")
    p.add_argument("--emulate-kernel-ms", type=float, default=0.0, metavar="MS",
                   help="CPU only: each forward also takes MS (a backward 2 x MS) at the max SM "
                   "clock, scaled by max / current clock as read from NVML (cpu_shims."
                   "EmulatedKernels), so step times respond to clocks as on a GPU")
    p.add_argument("--emulate-last-stage-ms", type=float, default=0.0, metavar="MS",
                   help="with --emulate-kernel-ms: the last pipeline stage's forwards take MS "
                   "instead (its backwards 2 x MS), as a stage that also holds the output "
                   "layer and the loss: an unbalanced pipeline, whose other stages wait")
    p.add_argument("--emulate-run-ahead", action="store_true",
                   help="with --emulate-kernel-ms: queue each emulated kernel without waiting "
                   "for it, as a GPU's host does (the host runs ahead of the device until the "
                   "optimizer step); joulepipe follows the simulated GPU's stream either way")
    p.add_argument("--emulate-host-points", action="store_true",
                   help="with --emulate-kernel-ms: keep the simulated GPU's stream from "
                   "joulepipe, so clocks change and profile rows and iteration lines are timed "
                   "at the host's hook points (to see the error a host that runs ahead causes)")
    p.add_argument("--overlap-p2p-comm", action="store_true",
                   help="megatron-core's overlap_p2p_comm (Megatron-LM's "
                   "--overlap-p2p-communication, the interleaved schedule's usual setting): "
                   "P2P receives overlap computation instead of blocking before it (needs --vp "
                   "> 1; on a GPU also turns batch_p2p_comm off, so no batch_p2p_sync)")
    p.add_argument("--slow-pipeline", type=int, default=-1, metavar="DP_RANK",
                   help="make this data-parallel pipeline a straggler: its forwards sleep "
                   "--slow-ms in iterations --slow-from .. --slow-from + --slow-for - 1")
    p.add_argument("--slow-from", type=int, default=0, metavar="I")
    p.add_argument("--slow-for", type=int, default=0, metavar="N")
    p.add_argument("--slow-ms", type=float, default=0.0, metavar="MS")
    p.add_argument("--timeout-s", type=float, default=120,
                   help="timeout of every collective and point-to-point operation (a hang fails "
                   "instead of waiting forever)")
    p.add_argument("--exit-interval", type=int, default=0, metavar="N",
                   help="leave with sys.exit(0) right after iteration N, as Megatron-LM's "
                   "--exit-interval does: the code after the loop (here jpm.disable() and the "
                   "teardown) is skipped, and joulepipe's exit handler gives the clocks back")
    p.add_argument("--log-json", metavar="PATH",
                   help="each rank appends one JSON line per iteration (and per evaluation) "
                   "to PATH: rank, pp_rank, dp_rank, iteration, kind, loss (last stage only, "
                   "else null), time_s")
    return p


def check_args(parser, args, world_size):
    def fail(msg):
        parser.error(msg)  # exits with status 2 and the usage line

    tp = 1
    if world_size % (args.pp * tp) != 0:
        fail(f"world size {world_size} is not a multiple of --pp {args.pp} (tensor parallel 1)")
    if args.vp < 1:
        fail(f"--vp must be >= 1 (got {args.vp})")
    if args.vp > 1 and args.pp < 2:
        fail(f"--vp {args.vp} needs --pp 2: interleaving splits each pipeline stage")
    if args.layers % (args.pp * args.vp) != 0:
        fail(f"--layers {args.layers} must be divisible by pp * vp = {args.pp * args.vp}")
    if args.microbatches < 1:
        fail(f"--microbatches must be >= 1 (got {args.microbatches})")
    if args.vp > 1 and args.microbatches % args.pp != 0:
        fail(f"the interleaved schedule needs --microbatches ({args.microbatches}) to be a "
             f"multiple of --pp ({args.pp})")
    if args.hidden_size % args.num_heads != 0:
        fail(f"--hidden-size {args.hidden_size} must be divisible by --num-heads "
             f"{args.num_heads}")
    for name in ("micro_batch_size", "seq_length", "iterations", "vocab_size"):
        if getattr(args, name) < 1:
            fail(f"--{name.replace('_', '-')} must be >= 1 (got {getattr(args, name)})")
    if args.eval_every < 0:
        fail(f"--eval-every must be >= 0 (got {args.eval_every})")
    if args.emulate_last_stage_ms < 0 or (args.emulate_last_stage_ms > 0
                                           and args.emulate_kernel_ms <= 0):
        fail("--emulate-last-stage-ms MS needs --emulate-kernel-ms (and MS > 0)")
    if args.emulate_run_ahead and args.emulate_kernel_ms <= 0:
        fail("--emulate-run-ahead needs --emulate-kernel-ms MS (the kernels that run ahead)")
    if args.emulate_host_points and args.emulate_kernel_ms <= 0:
        fail("--emulate-host-points goes with --emulate-kernel-ms")
    if args.overlap_p2p_comm and args.vp < 2:
        fail("--overlap-p2p-comm needs the interleaved schedule (--vp 2 or more): megatron-core "
             "overlaps P2P there only")
    return world_size // (args.pp * tp)


def synthetic_microbatches(args, kind, iteration, dp_rank, device):
    """The `args.microbatches` microbatches of one iteration for one
    data-parallel rank, as a list of dicts. Deterministic in (seed, kind,
    iteration, dp_rank), and the same on every pipeline stage (the first stage
    reads the tokens, the last the labels).

    Each sequence counts up from a random start by a random stride modulo the
    vocabulary, so the next token is predictable and the loss falls."""
    g = torch.Generator().manual_seed(
        args.seed * 1_000_003 + (0 if kind == "train" else 500_009) + iteration * 1_009 + dp_rank)
    out = []
    n, s = args.micro_batch_size, args.seq_length
    for _ in range(args.microbatches):
        start = torch.randint(0, args.vocab_size, (n, 1), generator=g)
        stride = torch.randint(1, 4, (n, 1), generator=g)
        seq = (start + stride * torch.arange(s + 1)) % args.vocab_size
        out.append({
            "tokens": seq[:, :-1].contiguous().to(device),
            "labels": seq[:, 1:].contiguous().to(device),
            "loss_mask": torch.ones(n, s, dtype=torch.float32, device=device),
            "position_ids": torch.arange(s, device=device).unsqueeze(0).expand(n, s).contiguous(),
            # megatron's convention: True = masked out (the future tokens).
            "attention_mask": torch.triu(torch.ones(1, 1, s, s, dtype=torch.bool, device=device),
                                         diagonal=1),
        })
    return out


def loss_func(loss_mask, output_tensor):
    """Mean token loss of a microbatch. Returns the (loss, reported) pair that
    the schedules divide by the number of microbatches."""
    losses = output_tensor.float().view(-1)
    mask = loss_mask.view(-1)
    loss = torch.sum(losses * mask) / mask.sum()
    # A copy: the schedule divides `loss` in place by the number of microbatches.
    return loss, {"lm loss": loss.detach().clone()}


# --slow-*: this rank's forwards sleep while its pipeline is made a straggler
# (set by main() each iteration). --emulate-kernel-ms: cpu_shims.EmulatedKernels.
SLOW_S = 0.0
KERNELS = None
KERNEL_MS = 0.0


def forward_step(data_iterator, model):
    """The forward_step_func megatron's schedules call once per microbatch
    and model chunk. On stages other than the first, GPTModel ignores the
    tokens and takes its input from the tensor the schedule received from the
    previous stage (set_input_tensor); stages other than the last return
    hidden states and the loss function is not applied to them."""
    if SLOW_S > 0:
        time.sleep(SLOW_S)
    if KERNELS is not None:
        KERNELS.wait(KERNEL_MS)
    batch = next(data_iterator)
    output = model(batch["tokens"], batch["position_ids"], batch["attention_mask"],
                   labels=batch["labels"])
    if KERNELS is not None and output.requires_grad:
        # The backward's kernel: twice the forward's, as for a transformer.
        output.register_hook(lambda grad: KERNELS.wait(2 * KERNEL_MS))
    return output, partial(loss_func, batch["loss_mask"])


def build_model_chunks(args, config):
    """One GPTModel per virtual pipeline chunk of this stage, each with the
    embedding (pre_process) only on the globally first chunk and the output
    layer and loss (post_process) only on the globally last one."""
    spec = get_gpt_layer_local_spec()
    chunks = []
    for vp_stage in range(args.vp):
        vp_arg = vp_stage if args.vp > 1 else None
        chunks.append(GPTModel(
            config=config,
            transformer_layer_spec=spec,
            vocab_size=args.vocab_size,
            max_sequence_length=args.seq_length,
            pre_process=parallel_state.is_pipeline_first_stage(ignore_virtual=False,
                                                               vp_stage=vp_arg),
            post_process=parallel_state.is_pipeline_last_stage(ignore_virtual=False,
                                                               vp_stage=vp_arg),
            share_embeddings_and_output_weights=False,
            vp_stage=vp_arg,
        ))
    return chunks


def allreduce_data_parallel_grads(chunks, dp_group, dp_size):
    """Averages gradients over the data-parallel group, in one flat buffer.

    megatron's DistributedDataParallel wrapper (contiguous grad buffers,
    overlapped bucketed reduce, finalize_model_grads) would do this on a real
    job; for a tiny CPU model one blocking all-reduce after
    forward_backward_func is simpler and has no CUDA dependency. Embeddings
    are untied (share_embeddings_and_output_weights=False), so there is no
    embedding-group all-reduce between the first and last stage either."""
    if dp_size == 1:
        return
    grads = [p.grad for c in chunks for p in c.parameters() if p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, group=dp_group)
    flat /= dp_size
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()


def main():
    parser = build_parser()
    jpm, jpm_missing = import_joulepipe()
    if jpm is not None:
        # Adds --joulepipe {off,measure,profile,optimize} and the --joulepipe-* options.
        jpm.add_arguments(parser)
    else:
        parser.add_argument("--joulepipe", choices=["off"], default="off",
                            help="joulepipe mode; only 'off' because joulepipe.megatron is not "
                            f"importable here ({jpm_missing})")
    args = parser.parse_args()

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend="nccl" if device == "cuda" else "gloo",
                            timeout=timedelta(seconds=args.timeout_s))
    rank = dist.get_rank()
    dp_size = check_args(parser, args, dist.get_world_size())

    if device == "cpu":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import cpu_shims

        cpu_shims.apply()
        if args.emulate_kernel_ms > 0:
            global KERNELS, KERNEL_MS
            KERNELS = cpu_shims.EmulatedKernels(int(os.environ.get("LOCAL_RANK", "0")),
                                                run_ahead=args.emulate_run_ahead)
            KERNEL_MS = args.emulate_kernel_ms
    elif args.emulate_kernel_ms > 0:
        parser.error("--emulate-kernel-ms is for CPU runs only")

    parallel_state.initialize_model_parallel(
        tensor_model_parallel_size=1,
        pipeline_model_parallel_size=args.pp,
        virtual_pipeline_model_parallel_size=args.vp if args.vp > 1 else None,
    )
    pp_rank = parallel_state.get_pipeline_model_parallel_rank()
    dp_rank = parallel_state.get_data_parallel_rank()
    dp_group = parallel_state.get_data_parallel_group()
    is_last_stage = parallel_state.is_pipeline_last_stage()  # of the physical stage
    if KERNELS is not None and args.emulate_last_stage_ms > 0 and (
            pp_rank == args.pp - 1):
        KERNEL_MS = args.emulate_last_stage_ms

    def print_rank_log(msg):
        # One write per line, so that the ranks' lines never interleave on a shared pipe.
        sys.stdout.write(f"[rank {rank}] {msg}\n")
        sys.stdout.flush()

    # Same weights on every data-parallel replica, different ones per stage
    # (megatron.training's convention: seed + 100 * pipeline rank).
    stage_seed = args.seed + 100 * pp_rank
    torch.manual_seed(stage_seed)
    if device == "cuda":
        from megatron.core import tensor_parallel

        tensor_parallel.model_parallel_cuda_manual_seed(stage_seed)

    config = TransformerConfig(
        num_layers=args.layers,
        hidden_size=args.hidden_size,
        num_attention_heads=args.num_heads,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        use_cpu_initialization=(device == "cpu"),
        params_dtype=torch.float32,
        pipeline_dtype=torch.float32,
        pipeline_model_parallel_size=args.pp,
        virtual_pipeline_model_parallel_size=args.vp if args.vp > 1 else None,
        # gloo: plain isend/irecv per tensor, not batch_isend_irecv + cuda sync
        # (nor with overlap_p2p_comm, which megatron-core runs unbatched).
        batch_p2p_comm=(device == "cuda" and not args.overlap_p2p_comm),
        overlap_p2p_comm=args.overlap_p2p_comm,
    )
    chunks = build_model_chunks(args, config)
    if device == "cuda":
        for c in chunks:
            c.cuda(torch.cuda.current_device())
    params = [p for c in chunks for p in c.parameters()]
    optimizer = torch.optim.SGD(params, lr=args.lr)

    tokens_per_iteration = args.microbatches * args.micro_batch_size * args.seq_length * dp_size
    print_rank_log(
        f"pp {args.pp} (rank {pp_rank}) | vp {args.vp} | dp {dp_size} (rank {dp_rank}) | "
        f"{len(chunks)} chunk(s), {sum(p.numel() for p in params)} parameters | "
        f"{tokens_per_iteration} tokens/iteration | device {device}")

    joulepipe_on = args.joulepipe != "off"
    exiting_early = False  # --exit-interval: leave as Megatron-LM does, past every cleanup
    if joulepipe_on:
        # tokens/s from each schedule call's own batch (microbatches x
        # micro-batch size x sequence length x data-parallel size).
        # The stream the emulated kernels run on, as on a GPU, where the
        # session takes PyTorch's current stream itself.
        stream = (KERNELS.stream_handle if KERNELS is not None and not args.emulate_host_points
                  else None)
        jpm.enable_from_args(args, log=print_rank_log,
                             **({"stream": stream} if stream is not None else {}))
    try:
        # Obtained AFTER enable: joulepipe's hooks wrap megatron's schedule
        # functions (and forward_step / backward_step), so the function looked
        # up now is the wrapped one.
        forward_backward_func = get_forward_backward_func()
        log_fd = None
        if args.log_json:
            log_fd = os.open(args.log_json, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

        def run_schedule(kind, iteration):
            batches = synthetic_microbatches(args, kind, iteration, dp_rank, device)
            # One iterator per model chunk: each chunk consumes every microbatch once.
            iterators = [iter(batches) for _ in chunks]
            return forward_backward_func(
                forward_step_func=forward_step,
                data_iterator=iterators,
                model=chunks,
                num_microbatches=args.microbatches,
                seq_length=args.seq_length,
                micro_batch_size=args.micro_batch_size,
                forward_only=(kind == "eval"),
            )

        def mean_loss(losses_reduced):
            """Loss averaged over microbatches and data-parallel replicas
            (last stage only; None elsewhere)."""
            if not is_last_stage:
                return None
            loss = torch.stack([r["lm loss"] for r in losses_reduced]).mean().cpu()
            if dp_size > 1:
                dist.all_reduce(loss, group=dp_group)
                loss /= dp_size
            return loss.item()

        def report(kind, iteration, loss, seconds):
            label = "loss" if kind == "train" else "eval loss"
            loss_text = f"{loss:.6f}" if loss is not None else "-"
            print_rank_log(f"iteration {iteration} | {label} {loss_text} | "
                           f"time {seconds * 1e3:.1f} ms")
            if log_fd is not None:
                record = {"rank": rank, "pp_rank": pp_rank, "dp_rank": dp_rank,
                          "iteration": iteration, "kind": kind, "loss": loss,
                          "time_s": seconds}
                os.write(log_fd, (json.dumps(record) + "\n").encode())

        global SLOW_S
        for iteration in range(1, args.iterations + 1):
            slow = (dp_rank == args.slow_pipeline
                    and args.slow_from <= iteration < args.slow_from + args.slow_for)
            SLOW_S = args.slow_ms / 1e3 if slow else 0.0
            for c in chunks:
                c.train()
            start = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            losses_reduced = run_schedule("train", iteration)
            if KERNELS is not None:
                # The device catches up before the optimizer step, as in
                # Megatron-LM, whose optimizer reads the gradients' norm.
                KERNELS.synchronize()
            allreduce_data_parallel_grads(chunks, dp_group, dp_size)
            optimizer.step()
            loss = mean_loss(losses_reduced)
            if device == "cuda":
                torch.cuda.synchronize()
            report("train", iteration, loss, time.perf_counter() - start)
            # joulepipe logs the iteration's line itself (through `log`) once
            # the optimizer has stepped.

            if args.exit_interval and iteration == args.exit_interval:
                exiting_early = True
                sys.exit(0)

            if args.eval_every > 0 and iteration % args.eval_every == 0:
                for c in chunks:
                    c.eval()
                start = time.perf_counter()
                # joulepipe measures the evaluation apart from the iterations.
                with torch.no_grad(), (jpm.phase("evaluation") if joulepipe_on
                                       else contextlib.nullcontext()):
                    losses_reduced = run_schedule("eval", iteration)
                loss = mean_loss(losses_reduced)
                report("eval", iteration, loss, time.perf_counter() - start)
        if joulepipe_on and jpm.session() is not None:
            order = jpm.session().schedule_order or []
            print_rank_log("joulepipe: the order this stage ran: " + " ".join(
                f"{k[0].upper()}{m}{'.' + str(c) if args.vp > 1 else ''}" for k, m, c in order))
            if log_fd is not None:
                os.write(log_fd, (json.dumps({"rank": rank, "pp_rank": pp_rank, "kind": "order",
                                              "order": order}) + "\n").encode())
        if log_fd is not None:
            os.close(log_fd)
    finally:
        if joulepipe_on and not exiting_early:
            jpm.disable()  # restores clocks and unwraps megatron, also on errors
    parallel_state.destroy_model_parallel()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
