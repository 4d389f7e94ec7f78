"""The Megatron-LM launcher (`-m joulepipe.megatron.run`) runs a script as
`python script.py` would (issue 43, item 1): the script's folder first on
sys.path (Megatron-LM's pretrain_gpt.py imports gpt_builders from beside
it), and the script's own --help reaches the script. joulepipe is off here:
this is the launcher alone, without torch."""

import subprocess
import sys

import pytest

from build_paths import package_built, python_env

if not package_built():
    pytest.skip("joulepipe._core not built (pip install pybind11; cmake --build build)",
                allow_module_level=True)

SCRIPT = """
import sys
import beside  # a module next to the script, as gpt_builders is to pretrain_gpt.py
print("argv", sys.argv[1:])
print("name", __name__)
print("beside", beside.WHERE)
"""


def launch(tmp_path, *args):
    folder = tmp_path / "megatron-lm"
    folder.mkdir(exist_ok=True)
    (folder / "train.py").write_text(SCRIPT)
    (folder / "beside.py").write_text("WHERE = 'next to the script'\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "joulepipe.megatron.run", *args],
                          env=python_env(), cwd=elsewhere, capture_output=True, text=True,
                          timeout=60)


def test_the_scripts_folder_is_on_the_path_and_its_help_is_its_own(tmp_path):
    script = tmp_path / "megatron-lm" / "train.py"
    proc = launch(tmp_path, "--joulepipe", "off", "--", script, "--help", "--lr", "1e-4",
                  "--joulepipe-log", "x.jsonl")
    assert proc.returncode == 0, proc.stderr
    assert "argv ['--help', '--lr', '1e-4']" in proc.stdout  # joulepipe's flag taken out
    assert "name __main__" in proc.stdout
    assert "beside next to the script" in proc.stdout
    assert "usage: python -m joulepipe.megatron.run" not in proc.stdout


def test_the_launchers_own_help_and_a_missing_script(tmp_path):
    proc = launch(tmp_path, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "usage: python -m joulepipe.megatron.run" in proc.stdout
    proc = launch(tmp_path, "--joulepipe", "off", "--", tmp_path / "nope.py")
    assert proc.returncode == 2
    assert "nope.py' is not a file" in proc.stderr


CHECKOUT_SCHEDULES = """
def _fn(*args, **kwargs):
    return None

forward_backward_no_pipelining = forward_backward_pipelining_without_interleaving = _fn
forward_backward_pipelining_with_interleaving = forward_step = backward_step = _fn
"""


def test_joulepipe_hooks_the_megatron_core_beside_the_script(tmp_path):
    """A Megatron-LM checkout holds its own megatron/core beside
    pretrain_gpt.py. The launcher puts the script's folder on sys.path before
    enabling, so joulepipe wraps the schedules the script will run, not
    those of an installed megatron-core wheel."""
    pytest.importorskip("torch", reason="torch is not installed (scripts/install-deps)")
    folder = tmp_path / "megatron-lm"
    schedules = folder / "megatron" / "core" / "pipeline_parallel"
    schedules.mkdir(parents=True)
    (folder / "megatron" / "core" / "__init__.py").write_text("WHERE = 'the checkout'\n")
    (schedules / "__init__.py").write_text("")
    (schedules / "schedules.py").write_text(CHECKOUT_SCHEDULES)
    (folder / "train.py").write_text(
        "import megatron.core\nfrom megatron.core.pipeline_parallel import schedules\n"
        "print('core from', megatron.core.WHERE)\n"
        "print('hooked', hasattr(schedules.forward_step, '__wrapped__'))\n")
    proc = subprocess.run([sys.executable, "-m", "joulepipe.megatron.run", "--joulepipe",
                           "measure", "--", folder / "train.py"], env=python_env(),
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "core from the checkout" in proc.stdout
    assert "hooked True" in proc.stdout
