"""A PEP 517 / PEP 660 build backend for the pure-Python pcnn package, with
no dependency (pyproject.toml: requires = []), so that pip builds the wheel
offline: pip's isolated build environment has nothing to download.

It packs pcnn/*.py into a py3-none-any wheel with the metadata of
pyproject.toml's [project] table (the few keys it uses, read without a TOML
parser: Python 3.8+ has none before 3.11's tomllib) and the version of
pcnn/__init__.py.  An sdist carries the same files; an editable install is
a .pth file pointing at this directory.
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "pcnn"
TAG = "py3-none-any"


def _version():
    with open(os.path.join(ROOT, NAME, "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__\s*=\s*"([^"]+)"', f.read(), re.M)
    if not m:
        raise RuntimeError("pcnn/__init__.py has no __version__ = \"...\" line")
    return m.group(1)


def _project():
    """The string and list values of [project] in pyproject.toml."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    section = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S).group(1)
    out = {}
    for key, value in re.findall(r"^([\w-]+)\s*=\s*(.+?)\s*(?:#.*)?$", section, re.M):
        if value.startswith('"'):
            out[key] = value.strip('"')
        elif value.startswith("["):
            out[key] = re.findall(r'"([^"]*)"', value)
        elif value.startswith("{"):
            m = re.search(r'text\s*=\s*"([^"]*)"', value)
            out[key] = m.group(1) if m else ""
    return out


def _metadata():
    p = _project()
    lines = ["Metadata-Version: 2.1", "Name: %s" % NAME, "Version: %s" % _version(),
             "Summary: %s" % p.get("description", ""),
             "License: %s" % p.get("license", ""),
             "Requires-Python: %s" % p.get("requires-python", ">=3")]
    lines += ["Requires-Dist: %s" % d for d in p.get("dependencies", [])]
    readme = os.path.join(ROOT, "README.md")
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = "\n" + f.read()
    return "\n".join(lines) + "\n" + body


def _dist_info():
    return "%s-%s.dist-info" % (NAME, _version())


def _wheel_file():
    return ("Wheel-Version: 1.0\nGenerator: pcnn_build\nRoot-Is-Purelib: true\n"
            "Tag: %s\n" % TAG)


def _sources():
    pkg = os.path.join(ROOT, NAME)
    return sorted(n for n in os.listdir(pkg) if n.endswith(".py"))


def _write_wheel(wheel_directory, files):
    """files: (archive name, bytes) pairs; adds the dist-info and RECORD."""
    dist = _dist_info()
    files = list(files) + [(dist + "/METADATA", _metadata().encode()),
                           (dist + "/WHEEL", _wheel_file().encode()),
                           (dist + "/top_level.txt", (NAME + "\n").encode())]
    record = []
    for name, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        record.append("%s,sha256=%s,%d" % (name, digest.decode(), len(data)))
    record.append(dist + "/RECORD,,")
    filename = "%s-%s-%s.whl" % (NAME, _version(), TAG)
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w",
                         zipfile.ZIP_DEFLATED) as z:
        for name, data in files:
            z.writestr(name, data)
        z.writestr(dist + "/RECORD", "\n".join(record) + "\n")
    return filename


def _read(path):
    with open(path, "rb") as f:
        return f.read()


# PEP 517 hooks.

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist = os.path.join(metadata_directory, _dist_info())
    os.makedirs(dist, exist_ok=True)
    with open(os.path.join(dist, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(dist, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_wheel_file())
    return _dist_info()


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory,
                        [("%s/%s" % (NAME, n), _read(os.path.join(ROOT, NAME, n)))
                         for n in _sources()])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # PEP 660: the installed package is this directory, through a .pth file.
    return _write_wheel(wheel_directory, [("%s.pth" % NAME, (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, _version())
    members = ["pyproject.toml", "README.md", "_build_backend/pcnn_build.py"]
    members += ["%s/%s" % (NAME, n) for n in _sources()]
    filename = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz",
                      format=tarfile.PAX_FORMAT) as tar:
        for m in members:
            path = os.path.join(ROOT, m)
            if os.path.exists(path):
                tar.add(path, arcname="%s/%s" % (base, m))
        pkg_info = _metadata().encode()
        info = tarfile.TarInfo("%s/PKG-INFO" % base)
        info.size = len(pkg_info)
        tar.addfile(info, io.BytesIO(pkg_info))
    return filename
