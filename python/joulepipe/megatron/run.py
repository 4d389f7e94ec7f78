"""Runs an unmodified Megatron-LM training script with joulepipe:

    torchrun --nproc-per-node 8 -m joulepipe.megatron.run --joulepipe optimize \\
        -- pretrain_gpt.py --tensor-model-parallel-size 2 ...

Everything before ``--`` is joulepipe's (``--help`` lists it); the script and
its own arguments follow. joulepipe flags written after the script are taken
out too, so Megatron's parser never sees them; the script's ``--help`` is the
script's. The script runs as ``python pretrain_gpt.py`` would run it: as
``__main__``, with its own folder first on ``sys.path`` (Megatron-LM's
``pretrain_gpt.py`` imports ``gpt_builders`` from beside it). The hooks are
installed before the script starts; the session begins at the first training
iteration.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from typing import List, Optional

import joulepipe.megatron as jpm
from joulepipe.megatron.arguments import add_arguments


def _parser(add_help: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m joulepipe.megatron.run", allow_abbrev=False, add_help=add_help,
        description="Run a Megatron-LM script (e.g. pretrain_gpt.py) with joulepipe enabled.",
        epilog="example: torchrun --nproc-per-node 8 -m joulepipe.megatron.run --joulepipe "
               "optimize -- pretrain_gpt.py <megatron args>")
    add_arguments(parser)
    return parser


def main(argv: Optional[List[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" in argv:
        split = argv.index("--")
        ours, script = argv[:split], argv[split + 1:]
    elif argv and argv[0].startswith("-"):
        ours, script = argv, []  # e.g. --help: no script named
    else:
        ours, script = [], argv
    parser = _parser()
    args = parser.parse_args(ours)
    if not script:
        parser.error("no training script: put it after `--`, e.g. -- pretrain_gpt.py <args>")
    if not os.path.isfile(script[0]):
        parser.error(f"the training script {script[0]!r} is not a file; name it after `--`, "
                     "e.g. -- pretrain_gpt.py <args>")
    # joulepipe flags among the script's arguments are ours as well; the
    # script's own --help (and -h) stay the script's.
    args, rest = _parser(add_help=False).parse_known_args(script[1:], namespace=args)
    # As `python script.py`: the script's folder is the first place imports
    # look (the launcher's own first entry, `-m`'s working directory, stays
    # behind it). Before enable: its import of megatron.core must find the
    # one a Megatron-LM checkout holds beside its script, as the script will.
    sys.path.insert(0, os.path.dirname(os.path.abspath(script[0])))
    if args.joulepipe != "off":
        jpm.enable_from_args(args)  # every way out gives the clocks back (_guard.py)
    sys.argv = [script[0]] + rest
    runpy.run_path(script[0], run_name="__main__")


if __name__ == "__main__":
    main()
