"""Stand-in for Megatron-LM's megatron/training/training.py (tests only):
the function joulepipe measures a checkpoint save by, with Megatron-LM's
name. megatron_lm_loop.py calls it through the module, between iterations,
as Megatron-LM's train() does."""
import time

SAVE_S = 0.03  # what a save takes here
saves = []


def save_checkpoint_and_time(iteration, *args, **kwargs):
    time.sleep(SAVE_S)
    saves.append(iteration)
