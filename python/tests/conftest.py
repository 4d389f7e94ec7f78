"""Makes the build tree's joulepipe importable in the test process itself
(tests that need the simulated NVML library run a child instead: NVML is
loaded once per process)."""

import sys

from build_paths import PYTHON_DIR

if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))
