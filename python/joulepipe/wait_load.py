"""``python -m joulepipe.wait_load [--device N]``: keeps one GPU waiting the
way a pipeline stage waits on a peer (a spin-wait kernel, torch.cuda._sleep,
back to back) until SIGTERM or Ctrl-C. The load `joulepipe calibrate-wait`
measures under:

    joulepipe calibrate-wait --gpu 0 --out wait.json -- python -m joulepipe.wait_load --device 0

--device is CUDA's index (the same visible numbering as calibrate-wait's
--gpu). Exits 2 with the reason when there is no CUDA GPU to spin on."""

import argparse
import signal
import sys

# Cycles per spin kernel: long enough that launches are a negligible share
# of the time, short enough that SIGTERM is seen within a fraction of a
# second (about 0.5 s at 2 GHz).
SPIN_CYCLES = 1_000_000_000


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m joulepipe.wait_load",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", type=int, default=0, help="CUDA device index (default 0)")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("joulepipe.wait_load: needs PyTorch with CUDA (import torch failed)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("joulepipe.wait_load: needs a CUDA GPU (torch.cuda.is_available() is False)",
              file=sys.stderr)
        return 2
    if not 0 <= args.device < torch.cuda.device_count():
        print(f"joulepipe.wait_load: --device {args.device} is not visible "
              f"(0..{torch.cuda.device_count() - 1}; check CUDA_VISIBLE_DEVICES)", file=sys.stderr)
        return 2
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(True))
    torch.cuda.set_device(args.device)
    while not stop:
        torch.cuda._sleep(SPIN_CYCLES)
        torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
