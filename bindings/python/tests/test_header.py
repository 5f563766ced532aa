"""The binding agrees with include/pcnn.h: every public function has a
prototype with the types the header implies, every enum member its value,
every status its exception, and the loaded library passed the version
check."""
import ctypes
import re

import pytest

import pcnn
from pcnn import _api, enums, errors
from conftest import HEADER


def header():
    with open(HEADER) as f:
        return f.read()


def public_functions(src):
    out = {}
    for m in re.finditer(r"PCNN_API\s+([^;]*?)\s*\b(pcnn_\w+)\s*\(([^)]*)\)\s*;", src, re.S):
        params = " ".join(m.group(3).split())
        out[m.group(2)] = (" ".join(m.group(1).split()),
                           [] if params == "void" else [p.strip() for p in params.split(",")])
    return out


def expected_ctype(decl, structs, enum_names, returned=False):
    """The ctypes type the table's conventions give a C parameter or return
    type without its name (see pcnn/_api.py)."""
    const = re.search(r"\bconst\b", decl) is not None
    stars = decl.count("*")
    base = re.sub(r"\bconst\b", "", decl).replace("*", " ").split()[0]
    scalar = {"int": ctypes.c_int, "long": ctypes.c_long, "unsigned": ctypes.c_uint,
              "float": ctypes.c_float,
              "double": ctypes.c_double, "size_t": ctypes.c_size_t,
              "uint64_t": ctypes.c_uint64, "MPI_Comm": ctypes.c_int, "MPI_Fint": ctypes.c_int}
    if returned and base == "pcnn_status" and stars == 0:
        return "STATUS"
    if base in structs:
        return {1: ctypes.c_void_p, 2: ctypes.POINTER(ctypes.c_void_p)}[stars]
    if base in ("pcnn_step_callback", "pcnn_log_callback") and stars == 0:
        return ctypes.c_void_p  # a C function pointer (ctypes.CFUNCTYPE passes as one)
    if base in enum_names:  # an enum, or an enum out-parameter
        return {0: ctypes.c_int, 1: ctypes.POINTER(ctypes.c_int)}[stars]
    if base == "char":  # const char * strings in, char * buffers out
        if stars == 2:
            return ctypes.POINTER(ctypes.c_char_p)
        return ctypes.c_char_p if const else ctypes.c_void_p
    if stars == 0:
        return scalar[base]
    if base in ("float", "int32_t", "void"):
        return ctypes.c_void_p  # element buffers: numpy arrays by address
    return ctypes.POINTER(scalar[base])


def test_every_public_function_has_a_prototype_of_the_right_types():
    src = header()
    structs = set(re.findall(r"typedef struct (pcnn_\w+) \1;", src))
    enum_names = set(re.findall(r"typedef enum (pcnn_\w+) \{", src))
    funcs = public_functions(src)
    assert len(funcs) >= 60 and "pcnn_net_train_step" in funcs
    table = {name: (res, args) for name, res, args in _api.PROTOTYPES}
    assert sorted(set(funcs) - set(table)) == [], "functions of pcnn.h without a prototype"
    assert sorted(set(table) - set(funcs)) == [], "prototypes of functions not in pcnn.h"
    for name, (ret, params) in funcs.items():
        res, args = table[name]
        want = expected_ctype(ret, structs, enum_names, returned=True)
        assert (res is _api.STATUS) if want == "STATUS" else res is want, (name, ret)
        assert len(args) == len(params), (name, "argument count")
        for got, param in zip(args, params):
            decl = re.sub(r"\b[A-Za-z_]\w*$", "", param)  # drop the parameter name
            assert got is expected_ctype(decl, structs, enum_names), (name, param)


def test_every_prototype_resolves_in_the_loaded_library():
    assert _api.current().missing == []


def test_enums_match_the_header():
    src = header()
    for c_name, (cls, prefix) in enums.C_PREFIX.items():
        body = re.search(r"typedef enum %s \{(.*?)\} %s;" % (c_name, c_name), src, re.S)
        assert body, c_name
        text = re.sub(r"/\*.*?\*/", "", body.group(1), flags=re.S)
        members = dict((k, int(v)) for k, v in re.findall(r"(PCNN_\w+)\s*=\s*(\d+)", text))
        # Experimental members hold reserved values in the enum, named by the
        # header's experimental section.
        for name, reserved in re.findall(r"#define (PCNN_\w+) (PCNN_\w+_EXPERIMENTAL_\d+)\b", src):
            if reserved in members:
                members[name] = members.pop(reserved)
        assert not [m for m in members if "_EXPERIMENTAL_" in m], c_name
        assert members, c_name
        ours = {prefix + m.name: int(m) for m in cls}
        assert ours == members, c_name
    assert set(re.findall(r"typedef enum (pcnn_\w+) \{", src)) == set(enums.C_PREFIX)
    events = dict(re.findall(r"#define PCNN_SCHED_EVENT_(\w+) (\d+)u", src))
    assert events and {k: int(v) for k, v in events.items()} == \
        {e.name: int(e) for e in enums.SchedEvent}


def test_every_status_has_its_exception_with_the_library_name():
    lib = _api.current()
    for status in enums.Status:
        if status == enums.Status.OK:
            continue
        cls = errors.BY_STATUS[int(status)]
        assert cls.status == int(status)
        assert cls.status_name == lib.status_name(int(status))
        assert issubclass(cls, pcnn.PcnnError)


def test_version_check():
    lib = _api.current()
    assert lib.version_number // 10000 == _api.EXPECTED_MAJOR
    assert pcnn.library_version() == lib.version
    assert re.fullmatch(r"\d+\.\d+\.\d+", lib.version)
    m = re.search(r"#define PCNN_VERSION_MAJOR (\d+)", header())
    assert int(m.group(1)) == _api.EXPECTED_MAJOR


def test_a_library_of_another_major_version_is_refused(monkeypatch):
    monkeypatch.setattr(_api, "_lib", None)
    monkeypatch.setattr(_api, "_used", False)
    monkeypatch.setattr(_api, "EXPECTED_MAJOR", 99)
    with pytest.raises(pcnn.LibraryError, match=r"\(major 0\) but this binding speaks major 99"):
        _api.load_library()


def test_a_function_missing_from_the_library_raises_unsupported(monkeypatch):
    lib = _api.current()
    monkeypatch.setattr(_api, "PROTOTYPES",
                        _api.PROTOTYPES + [("pcnn_from_the_future", _api.STATUS, ())])
    newer = _api.Library(lib.cdll, lib.path)
    assert newer.missing == ["pcnn_from_the_future"]
    with pytest.raises(pcnn.UnsupportedError, match="pcnn_from_the_future is not in"):
        newer.pcnn_from_the_future()
    assert newer.pcnn_version_number() == lib.version_number
