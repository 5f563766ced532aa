"""The first Python snippet of README.md and of bindings/python/README.md
runs as written, from the repository root, and learns something."""
import os
import re
import shutil
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


def first_c_block(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r"^```c\n(.*?)^```", text, re.S | re.M)
    assert m, "%s has no ```c block" % path
    return m.group(1)


def test_c_snippet_tears_down_what_it_creates(tmp_path):
    """Every handle the README's C snippet creates is destroyed, by
    address, and it compiles (inside a function, its free names declared)
    with -Werror; the destroy call with the handle itself, which the
    README warns of, is refused with -Werror=incompatible-pointer-types as
    it says."""
    code = first_c_block(os.path.join(REPO, "README.md"))
    created = re.findall(r"pcnn_(net|comm)_create\w*\([^;]*&(\w+)\)", code)
    assert created, code
    for kind, name in created:
        assert "pcnn_%s_destroy(&%s)" % (kind, name) in code, (kind, name)
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    include = os.path.join(REPO, "include")
    # pcnn_config.h: generated in the build tree of the library under test
    lib = os.environ.get("PCNN_LIBRARY")
    build_include = (os.path.join(os.path.dirname(os.path.dirname(lib)), "include") if lib
                     else os.path.join(REPO, "build", "include"))
    config = open(os.path.join(build_include, "pcnn_config.h")).read()
    mpi_pc = "ompi-c" if "PCNN_MPI_FAMILY PCNN_MPI_FAMILY_OPENMPI" in config else "mpich"
    mpi_flags = subprocess.run(["pkg-config", "--cflags", mpi_pc], capture_output=True,
                               text=True).stdout.split()
    body = "\n".join(l for l in code.splitlines() if not l.startswith("#include"))
    src = tmp_path / "snippet.c"
    src.write_text("#include <pcnn.h>\nvoid host(int n_local, const float *x_local, "
                   "const int32_t *labels_local) {\n%s\n}\n" % body)
    flags = [cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I" + include,
             "-I" + build_include] + mpi_flags + ["-c", str(src), "-o", str(tmp_path / "s.o")]
    r = subprocess.run(flags, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    wrong = tmp_path / "wrong.c"
    wrong.write_text("#include <pcnn.h>\nvoid f(pcnn_net *net) { pcnn_net_destroy(net); }\n")
    r = subprocess.run(flags[:-4] + ["-Werror=incompatible-pointer-types", "-c", str(wrong),
                                     "-o", str(tmp_path / "w.o")], capture_output=True, text=True)
    assert r.returncode != 0 and "incompatible" in r.stderr, r.stderr
