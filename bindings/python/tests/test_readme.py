"""The first Python snippet of README.md and of bindings/python/README.md
runs as written, from the repository root, and learns something."""
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO


def first_python_block(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r"^```python\n(.*?)^```", text, re.S | re.M)
    assert m, "%s has no ```python block" % path
    return m.group(1)


@pytest.mark.parametrize("readme", ["README.md", "bindings/python/README.md"])
def test_snippet_runs(readme):
    code = first_python_block(os.path.join(REPO, readme))
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    # fit printed its epochs (plain lines: stdout is a pipe), evaluate its result
    assert re.search(r"^epoch 3/3: loss [0-9.]+, val_loss [0-9.]+, val_accuracy",
                     r.stdout, re.M), r.stdout
    acc = float(re.search(r"Evaluation\(loss=[0-9.e-]+, accuracy=([0-9.]+)\)",
                          r.stdout).group(1))
    assert acc > 0.6, r.stdout


def sh_block_after(path, marker):
    text = open(path, encoding="utf-8").read()
    m = re.search(re.escape(marker) + r".*?^```sh\n(.*?)^```", text, re.S | re.M)
    assert m, "%s has no sh block after %r" % (path, marker)
    return [l.split("#")[0].strip() for l in m.group(1).splitlines() if l.split("#")[0].strip()]


def test_readme_pip_install_works_offline(tmp_path):
    """The README's offline pip install, run as written (in tmp_path, the
    package path made absolute), with no index reachable: it must succeed
    and the installed package import."""
    lines = sh_block_after(os.path.join(REPO, "README.md"), "install the package alone with pip")
    # Never into this interpreter: the block must make its own venv first.
    assert lines and lines[0].startswith("python3 -m venv"), lines
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_ROOT_USER_ACTION="ignore", PYTHONPATH="")
    for line in lines:
        cmd = line.replace("./bindings/python", os.path.join(REPO, "bindings", "python"))
        cmd = re.sub(r"^python3 ", sys.executable + " ", cmd)
        r = subprocess.run(cmd, shell=True, cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=240)
        assert r.returncode == 0, (cmd, r.stdout + r.stderr)
    venv_python = tmp_path / "venv" / "bin" / "python"
    assert venv_python.exists(), lines
    r = subprocess.run([str(venv_python), "-c", "import numpy, pcnn; print(pcnn.__file__)"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and str(tmp_path) in r.stdout, r.stdout + r.stderr
