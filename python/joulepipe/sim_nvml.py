"""``python -m joulepipe.sim_nvml``: prints the directory of the simulated
``libnvidia-ml.so.1`` (for ``LD_LIBRARY_PATH``); docs/sim-nvml.md configures it."""

import sys

from joulepipe._paths import sim_nvml_library_dir

if __name__ == "__main__":
    try:
        print(sim_nvml_library_dir())
    except FileNotFoundError as error:
        sys.exit(f"joulepipe.sim_nvml: {error}")
