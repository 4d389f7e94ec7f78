"""Where the files shipped inside the package are."""

from pathlib import Path


def sim_nvml_library_dir() -> str:
    """The directory holding joulepipe's simulated ``libnvidia-ml.so.1``.

    Put it first on ``LD_LIBRARY_PATH`` to run anything that uses NVML
    (joulepipe, pynvml, Zeus) against simulated GPUs, e.g. on a laptop or in
    CI::

        LD_LIBRARY_PATH=$(python -m joulepipe.sim_nvml) torchrun ...

    Everything the simulated library reports is simulated, not measured.
    """
    path = Path(__file__).resolve().parent / "sim-nvml"
    if not (path / "libnvidia-ml.so.1").exists():
        raise FileNotFoundError(
            f"{path}/libnvidia-ml.so.1 is missing: this joulepipe was installed without the "
            "simulated NVML library (reinstall with `pip install .` from the repository)")
    return str(path)
