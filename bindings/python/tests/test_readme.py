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
