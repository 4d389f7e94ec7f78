"""CPU shims that let unmodified megatron-core 0.16.1 pipeline schedules run
without a GPU, for the tiny-GPT example and the tests only.

This module is NOT part of the joulepipe package and must never be imported
on a machine with GPUs: it rebinds a few CUDA entry points process-wide. On a
real cluster the example skips it (train_tiny_gpt.py --device cuda).

What megatron-core 0.16.1 needs on CPU, and why each shim is enough:

1. torch.cuda.current_device() -> torch.device("cpu").
   p2p_communication.P2PCommunicator allocates its receive buffers (and, with
   variable sequence lengths, its shape tensors) with
   `torch.empty(..., device=torch.cuda.current_device())` and
   `torch.tensor(..., device=torch.cuda.current_device())`. Returning the CPU
   device makes those buffers CPU tensors that gloo can send and receive.

2. `torch` as seen by megatron.core.pipeline_parallel.schedules is a proxy
   whose zeros/empty map device "cuda" (or "cuda:N", or a CUDA torch.device)
   to the CPU. The three schedule functions allocate their token counter with
   the literal `torch.zeros([], dtype=torch.int, device="cuda")`. The proxy
   changes only that module's view of torch (every other attribute is the real
   torch's), so user code and the rest of megatron keep the real torch.zeros.

3. torch.cuda.synchronize() -> no-op. p2p_communication calls it after
   batched isend/irecv (only when batch_p2p_comm and batch_p2p_sync) and
   after exchanging shapes (variable_seq_lengths); there is nothing to
   synchronise on CPU.

4. The RNG tracker: tensor_parallel.random.initialize_rng_tracker(
   inference_rng_tracker=True, force_reset=True). The default tracker keeps
   CUDA generator states (torch.cuda.get_rng_state / set_rng_state); the
   inference tracker's fork() is a plain context that leaves the (CPU)
   default generator in use, so seeding with torch.manual_seed is enough.

Point-to-point communication must additionally use unbatched isend/irecv:
set `batch_p2p_comm=False` in the TransformerConfig (gloo has no
batch_isend_irecv for the ops megatron issues). That is configuration, not a
shim, so the caller sets it (see train_tiny_gpt.py).
"""

import types

import torch

_applied = False


def _cpu_device(device):
    """Maps a CUDA device spec (str, int index, torch.device) to the CPU;
    returns anything else unchanged."""
    if device is None:
        return None
    if isinstance(device, torch.device):
        return torch.device("cpu") if device.type == "cuda" else device
    if isinstance(device, str):
        return "cpu" if device.split(":", 1)[0] == "cuda" else device
    if isinstance(device, int):  # a bare index means a CUDA device to torch
        return "cpu"
    return device


def _cpu_factory(fn):
    def wrapper(*args, **kwargs):
        if "device" in kwargs:
            kwargs["device"] = _cpu_device(kwargs["device"])
        return fn(*args, **kwargs)

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = f"{fn.__name__} with CUDA devices mapped to the CPU (cpu_shims)."
    return wrapper


class _TorchOnCpu(types.ModuleType):
    """The torch module with zeros/empty mapping CUDA devices to the CPU."""

    zeros = staticmethod(_cpu_factory(torch.zeros))
    empty = staticmethod(_cpu_factory(torch.empty))

    def __getattr__(self, name):
        return getattr(torch, name)


def apply():
    """Installs the shims (idempotent). Call before building the model and
    before the first forward_backward_func call. Refuses to run when CUDA is
    available: there the real code paths must be used."""
    global _applied
    if _applied:
        return
    if torch.cuda.is_available():
        raise RuntimeError(
            "cpu_shims.apply(): CUDA is available; the CPU shims are for CPU-only runs "
            "(use --device cuda)"
        )
    from megatron.core.pipeline_parallel import schedules
    from megatron.core.tensor_parallel import random as mcore_random

    torch.cuda.current_device = lambda: torch.device("cpu")
    torch.cuda.synchronize = lambda device=None: None
    schedules.torch = _TorchOnCpu("torch")
    mcore_random.initialize_rng_tracker(inference_rng_tracker=True, force_reset=True)
    _applied = True


class EmulatedKernels:
    """CPU only: stands in for a forward's or backward's GPU kernels with an
    emulated kernel on the simulated GPU (joulepipe._core.SimulatedStream,
    docs/sim-nvml.md), so that on a CPU with the simulated NVML library the
    step time and the GPU's power respond to clocks as on a GPU: the kernel's
    compute share runs at the SM clock in force while it runs (a clock
    changed in the middle of it acts on the rest), and it draws the simulated
    GPU's power at that clock instead of a constant figure.

    wait(ms_at_max) queues a compute-bound kernel of ms_at_max at the GPU's
    highest clock and waits for the device to run it (the host waits here as
    a loop that reads a result would), or, with run_ahead, returns at once:
    the host runs ahead of the device, as on a GPU, until synchronize() (the
    loss read). The kernel also makes the instruction's time far less
    sensitive to a CPU shared by several ranks than the tiny model's
    computation is.
    """

    def __init__(self, device_index, run_ahead=False):
        self._run_ahead = run_ahead
        # joulepipe's own NVML (loaded at run time): no pynvml needed, so the
        # documented `pip install .` is enough.
        from joulepipe import _core

        gpu = next((g for g in _core.gpus() if g["nvml_index"] == device_index), None)
        if gpu is None:
            raise SystemExit(f"--emulate-kernel-ms: no GPU with NVML index {device_index}; run "
                             "with the simulated NVML library (docs/megatron.md)")
        try:
            self._stream = _core.SimulatedStream(device_index)
        except Exception as error:  # a real driver: nothing to emulate
            raise SystemExit(f"--emulate-kernel-ms: {error}")

    @property
    def stream_handle(self):
        """The stream's CUstream handle, for joulepipe's stream= option."""
        return self._stream.handle

    def wait(self, ms_at_max):
        self._stream.launch(ms_at_max / 1e3, compute_fraction=1.0)
        if not self._run_ahead:
            self._stream.synchronize()

    def synchronize(self):
        """Waits until the device ran every kernel queued so far."""
        self._stream.synchronize()
