"""A stand-in for Megatron-LM's ``megatron.training`` (the megatron-core
wheel has no such package), for the tests only: the three things joulepipe
reads from it, with Megatron-LM's names. ``megatron`` is a namespace package,
so this folder on PYTHONPATH adds ``megatron.training`` beside the installed
``megatron.core``. megatron_lm_loop.py sets the values as Megatron-LM's
``train()`` does."""
from megatron.training.global_vars import get_args  # noqa: F401  (Megatron-LM's re-export)
