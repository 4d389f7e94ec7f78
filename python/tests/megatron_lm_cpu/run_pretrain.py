"""``python -m joulepipe.megatron.run`` on a CPU, for Megatron-LM's own
scripts (tests only): the same arguments, after cuda_on_cpu and two stand-ins
for what needs a GPU's compiler. The script after ``--`` is in a
Megatron-LM checkout's top folder (tag core_v0.16.1), whose ``megatron``
package is imported.

    torchrun --nproc-per-node 2 run_pretrain.py --joulepipe measure \\
        -- $JOULEPIPE_MEGATRON_LM/pretrain_gpt.py <megatron args>

* ``megatron.core.transformer.custom_layers.batch_invariant_kernels`` imports
  triton, which a CPU build of torch lacks; Megatron-LM's initialize.py
  imports it for ``--batch-invariant-mode`` only, so a module of the same
  name whose functions refuse stands in.
* ``megatron.legacy.fused_kernels.load`` compiles CUDA sources with nvcc;
  here it loads nothing, and the unfused paths run (the arguments must turn
  the fusions off: see test_megatron_lm_pretrain_gpt.py).
"""

import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cuda_on_cpu  # noqa: E402

cuda_on_cpu.apply()
_script = sys.argv.index("--") + 1 if "--" in sys.argv else len(sys.argv)
if _script >= len(sys.argv):
    sys.exit("run_pretrain.py: name the Megatron-LM script after --")
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[_script])))


def _needs_triton(*args, **kwargs):
    raise RuntimeError("--batch-invariant-mode needs triton: not on the CPU harness")


_bik = types.ModuleType("megatron.core.transformer.custom_layers.batch_invariant_kernels")
_bik.enable_batch_invariant_mode = _bik.set_batch_invariant_mode = _needs_triton
_bik.disable_batch_invariant_mode = _needs_triton
_bik.is_batch_invariant_mode_enabled = lambda: False
sys.modules[_bik.__name__] = _bik

import megatron.legacy.fused_kernels as fused_kernels  # noqa: E402

fused_kernels.load = lambda args: None

from joulepipe.megatron import run  # noqa: E402

if __name__ == "__main__":
    run.main(sys.argv[1:])
