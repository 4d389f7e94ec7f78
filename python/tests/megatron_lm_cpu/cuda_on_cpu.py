"""CUDA mapped to the CPU, process-wide, so that Megatron-LM's own
``pretrain_gpt.py`` (tag core_v0.16.1) trains on a machine without a GPU.
For the tests only: never part of the joulepipe package, and it refuses to
run where CUDA is available.

Megatron-LM asserts CUDA, moves its model and tensors to it, seeds and swaps
its generator, times with its events and reads its memory. Each mapping
below gives what the CPU has:

* devices: ``torch.cuda.is_available()`` is true, ``set_device(i)`` selects
  device ``i`` and ``current_device()`` returns it (joulepipe then controls
  the simulated GPU of the rank's local index, as on a node), and a CUDA
  device given to a tensor factory, ``Tensor.to``, ``Tensor.cuda`` or
  ``Module.cuda`` means the CPU;
* the generator: CUDA's default generator is the CPU's default generator,
  the one CPU dropout draws from, so Megatron's RNG tracker swaps the state
  that is used (its check that the CPU state did not change inside a fork
  then fires on every fork: that warning is dropped);
* streams and events are immediate (an event records ``perf_counter``);
* memory figures are 0, the capability an A100's (8.0);
* ``torch.distributed.isend`` sends a copy. Megatron-LM frees a pipeline
  output's storage as soon as it is handed to isend
  (``deallocate_pipeline_outputs``, which it always sets): on a GPU the
  stream orders the send before any reuse of that memory, but gloo sends
  from a thread of its own, and the interleaved schedule (asynchronous
  isend/irecv) then sent freed memory: losses differed from run to run and
  one run met a NaN.
"""

import contextlib
import functools
import logging
import os
import time
import types

import torch

# Tensor factories that take device=.
_FACTORIES = ("empty", "zeros", "ones", "full", "tensor", "arange", "rand", "randn", "randint",
              "empty_like", "zeros_like", "ones_like", "full_like", "as_tensor", "linspace",
              "eye", "empty_strided", "randperm")


def _cpu(device):
    """A CUDA device spec (torch.device, "cuda[:i]", or a bare index, which
    torch reads as a CUDA device) as the CPU; anything else unchanged."""
    if isinstance(device, torch.device):
        return torch.device("cpu") if device.type == "cuda" else device
    if isinstance(device, str):
        return "cpu" if device.split(":", 1)[0] == "cuda" else device
    if isinstance(device, int) and not isinstance(device, bool):
        return "cpu"
    return device


def _device_kwarg_on_cpu(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        return fn(*args, **kwargs)
    return wrapper


class _Event:
    def __init__(self, *args, **kwargs):
        self._t = None

    def record(self, *args, **kwargs):
        self._t = time.perf_counter()

    def synchronize(self):
        pass

    def wait(self, *args, **kwargs):
        pass

    def query(self):
        return True

    def elapsed_time(self, end):
        return (end._t - self._t) * 1e3


class _Stream:
    def __init__(self, *args, **kwargs):
        pass

    def wait_stream(self, *args, **kwargs):
        pass

    def wait_event(self, *args, **kwargs):
        pass

    def synchronize(self):
        pass

    def query(self):
        return True

    def record_event(self, event=None):
        event = event or _Event()
        event.record()
        return event


class _EveryDevice(tuple):
    """torch.cuda.default_generators: the CPU's generator at every index."""

    def __getitem__(self, index):
        return torch.default_generator


class _NoForkWarning(logging.Filter):
    def filter(self, record):
        return "CPU RNG state changed within GPU RNG context" not in record.getMessage()


_applied = False


def apply():
    """Installs the mappings (idempotent), before Megatron is imported."""
    global _applied
    if _applied:
        return
    if torch.cuda.is_available():
        raise RuntimeError("cuda_on_cpu: CUDA is available; this harness is for CPU-only machines")
    for name in _FACTORIES:
        setattr(torch, name, _device_kwarg_on_cpu(getattr(torch, name)))
    tensor_to = torch.Tensor.to

    def to(self, *args, **kwargs):
        if args and not isinstance(args[0], (torch.dtype, torch.Tensor)):
            args = (_cpu(args[0]),) + args[1:]
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        return tensor_to(self, *args, **kwargs)

    torch.Tensor.to = to
    torch.Tensor.cuda = lambda self, *args, **kwargs: self
    torch.nn.Module.cuda = lambda self, *args, **kwargs: self

    isend = torch.distributed.isend

    @functools.wraps(isend)
    def isend_a_copy(tensor, *args, **kwargs):
        return isend(tensor.detach().clone(), *args, **kwargs)

    # torch.distributed.P2POp accepts only the isend of distributed_c10d.
    torch.distributed.isend = torch.distributed.distributed_c10d.isend = isend_a_copy

    cuda = torch.cuda
    selected = [0]

    def set_device(device):
        selected[0] = device.index if isinstance(device, torch.device) else int(
            str(device).rsplit(":", 1)[-1])

    cuda.is_available = lambda: True
    cuda.device_count = lambda: int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    cuda.set_device = set_device
    cuda.current_device = lambda: selected[0]
    cuda.synchronize = lambda device=None: None
    cuda.get_device_capability = lambda device=None: (8, 0)
    cuda.get_device_name = lambda device=None: "CPU (cuda_on_cpu)"

    generator = torch.default_generator
    for module in (cuda, cuda.random):
        module.get_rng_state = lambda device="cuda": generator.get_state()
        module.set_rng_state = lambda state, device="cuda": generator.set_state(state)
        module.manual_seed = lambda seed: generator.manual_seed(seed)
        module.manual_seed_all = lambda seed: generator.manual_seed(seed)
    cuda.default_generators = _EveryDevice((generator,))
    cuda._lazy_call = lambda callback, **kwargs: callback()
    logging.getLogger("megatron.core.tensor_parallel.random").addFilter(_NoForkWarning())

    cuda.Event = _Event
    cuda.Stream = _Stream
    cuda.current_stream = lambda device=None: _Stream()
    cuda.default_stream = lambda device=None: _Stream()
    cuda.stream = lambda stream=None: contextlib.nullcontext()
    cuda.empty_cache = lambda: None
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved",
                 "max_memory_reserved"):
        setattr(cuda, name, lambda device=None: 0)
    cuda.reset_peak_memory_stats = lambda device=None: None
    cuda.memory_stats = lambda device=None: {}
    cuda.nvtx = types.SimpleNamespace(range_push=lambda *args: None, range_pop=lambda: None,
                                      range=lambda *args, **kwargs: contextlib.nullcontext())
    _applied = True
