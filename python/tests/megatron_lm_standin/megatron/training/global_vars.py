"""Stand-in for Megatron-LM's megatron/training/global_vars.py (tests only)."""
import argparse

ARGS = argparse.Namespace(curr_iteration=0, log_interval=1)
TENSORBOARD = None
WANDB = None


def get_args():
    return ARGS


def get_tensorboard_writer():
    return TENSORBOARD


def get_wandb_writer():
    return WANDB
