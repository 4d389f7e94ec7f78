"""Where the tests find what the C++ build made, and the environment that
points a child process at the simulated NVML library.

The build directory is $JOULEPIPE_BUILD_DIR (default: build/ in the repo).
"""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("JOULEPIPE_BUILD_DIR", REPO / "build"))
if not BUILD.is_absolute():
    BUILD = REPO / BUILD
CLI = BUILD / "joulepipe"
LIB_DIR = BUILD / "sim-nvml"
LIB = LIB_DIR / "libnvidia-ml.so.1"

# Variables that would override the config file or, for Zeus, restrict the
# GPUs (CUDA_VISIBLE_DEVICES) or send setters to a Zeus daemon.
_SIM_OVERRIDES = ("JOULEPIPE_SIM_NVML_GPU", "JOULEPIPE_SIM_NVML_COUNT")
_ZEUS_OVERRIDES = ("CUDA_VISIBLE_DEVICES", "ZEUSD_SOCK_PATH", "ZEUSD_HOST_PORT", "ZEUSD_TOKEN")


def sim_nvml_env(config_path, zeus=False):
    """os.environ for a child whose dlopen("libnvidia-ml.so.1") finds the
    simulated library configured by `config_path`; with `zeus`, also without
    what would redirect Zeus's GPU layer."""
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = f"{LIB_DIR}:{env.get('LD_LIBRARY_PATH', '')}"
    env["JOULEPIPE_SIM_NVML_CONFIG"] = str(config_path)
    for name in _SIM_OVERRIDES + (_ZEUS_OVERRIDES if zeus else ()):
        env.pop(name, None)
    return env

# The build tree's Python package (cmake/python_module.cmake): the extension
# module joulepipe._core next to the pure-Python sources.
PYTHON_DIR = BUILD / "python"
PACKAGE = PYTHON_DIR / "joulepipe"


def python_env(config_path=None):
    """os.environ for a child that imports the build tree's joulepipe and,
    with `config_path`, loads the simulated NVML library it configures."""
    env = sim_nvml_env(config_path) if config_path is not None else dict(os.environ)
    env["PYTHONPATH"] = f"{PYTHON_DIR}:{env.get('PYTHONPATH', '')}"
    env.pop("JOULEPIPE_NVML_LIBRARY", None)
    return env


def package_built():
    """Whether the build made the extension module (it needs pybind11)."""
    return any(PACKAGE.glob("_core*.so"))
