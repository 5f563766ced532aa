#!/usr/bin/env python3
"""Generate the Fortran module `pcnn` (bindings/fortran/pcnn.f90) from
include/pcnn.h, so that the two cannot drift apart: the `fortran_module`
test regenerates it and compares.

    scripts/gen_fortran.py [--header include/pcnn.h] [-o bindings/fortran/pcnn.f90]
    scripts/gen_fortran.py --check bindings/fortran/pcnn.f90   # exit 1 if stale
    ... --check-ctypes bindings/python/pcnn/_prototypes.py     # the Python table too

What the module holds, all from the header:
  - every enum value and every numeric #define as an integer(c_int)
    parameter of the same name (the experimental ones too; a string
    #define as a character parameter; one built from C or MPI macros is
    listed as a comment, not bound), except
    PCNN_VERSION_NUMBER, which Fortran would confuse with the function
    pcnn_version_number: PCNN_HEADER_VERSION_NUMBER;
  - an ISO_C_BINDING interface for every PCNN_API function, under the C
    name.  Handles are type(c_ptr) (by value; `pcnn_net **out` by
    reference), enums and ints integer(c_int), size_t integer(c_size_t),
    uint64_t / int64_t integer(c_int64_t), float / double real(c_float) /
    real(c_double); float and int32 buffers are assumed-size arrays,
    other pointers scalars by reference, and every pointer but a handle is
    OPTIONAL (absent = NULL, as the header allows where it says "may be
    NULL").  Strings in are character(kind=c_char) arrays: pass
    pcnn_c_string(s).  `const char **` outputs are type(c_ptr): read them
    with pcnn_f_string;
  - abstract interfaces for the callback types (write them bind(c));
  - Fortran functions returning Fortran strings: pcnn_status_str,
    pcnn_last_error, pcnn_version_string (the C functions are bound as
    <name>_c), and pcnn_f_string / pcnn_c_string.
A function the generator cannot map fails the generation (so a new type in
the header is noticed), except pcnn_comm_create, whose MPI_Comm is not a
Fortran handle: Fortran hosts call pcnn_comm_create_fortran(comm, c) with
their MPI_Comm's integer (use mpi) or comm%mpi_val (use mpi_f08).
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_experimental_hints  # noqa: E402

HANDLES = {"pcnn_net", "pcnn_layer", "pcnn_dataset", "pcnn_comm", "pcnn_scheduler"}
SCALARS = {  # C type -> (Fortran type, kind to import)
    "int": ("integer(c_int)", "c_int"),
    "long": ("integer(c_long)", "c_long"),
    "unsigned": ("integer(c_int)", "c_int"),
    "MPI_Fint": ("integer(c_int)", "c_int"),
    "int32_t": ("integer(c_int32_t)", "c_int32_t"),
    "int64_t": ("integer(c_int64_t)", "c_int64_t"),
    "uint64_t": ("integer(c_int64_t)", "c_int64_t"),
    "size_t": ("integer(c_size_t)", "c_size_t"),
    "float": ("real(c_float)", "c_float"),
    "double": ("real(c_double)", "c_double"),
}
ARRAYS = {"float", "int32_t"}          # buffers of samples, labels, parameters
SCALAR_NAMES = {"loss"}                # float * that is one value
STRING_RETURNS = {"pcnn_status_str", "pcnn_last_error", "pcnn_version_string"}
# Fortran names ignore case: a constant named like a function is renamed.
RENAMED = {"PCNN_VERSION_NUMBER": "PCNN_HEADER_VERSION_NUMBER"}
SKIPPED = {"pcnn_comm_create": "MPI_Comm is not a Fortran handle: use pcnn_comm_create_fortran"}
LINE = 100


class Unmapped(Exception):
    pass


def strip(text):
    """The header without comments, with continued lines joined, and without
    the names section 9 defines for hosts that do not define
    PCNN_EXPERIMENTAL (scripts/gen_experimental_hints.py)."""
    text = gen_experimental_hints.strip_generated(text)
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return text.replace("\\\n", " ")


def parse(text):
    enums, defines, functions, callbacks = [], [], [], []
    src = strip(text)
    # Every opaque handle of the header (typedef struct pcnn_x pcnn_x;).
    HANDLES.update(re.findall(r"typedef\s+struct\s+(pcnn_\w+)\s+\1\s*;", src))
    for name, body in re.findall(r"typedef\s+enum\s+(\w+)\s*\{(.*?)\}\s*\w+\s*;", src, re.S):
        value = -1
        members = []
        for item in filter(None, (i.strip() for i in body.split(","))):
            m = re.match(r"(\w+)\s*(?:=\s*(.+))?$", item)
            if not m:
                raise Unmapped(f"enum {name}: cannot read '{item}'")
            value = int(m.group(2), 0) if m.group(2) else value + 1
            members.append((m.group(1), value))
        enums.append((name, members))
    for line in src.splitlines():
        m = re.match(r"\s*#\s*define\s+(PCNN_\w+)\s+(.+?)\s*$", line)
        if not m or m.group(1) == "PCNN_API":
            continue
        if re.fullmatch(r'"[^"\\]*"', m.group(2)):  # a string: a character parameter
            defines.append((m.group(1), m.group(2)))
            continue
        # A cast to one of the header's enum types ("((pcnn_exchange)3)") is the bare value.
        value = re.sub(r"\(\s*pcnn_\w+\s*\)", "", m.group(2))
        value = re.sub(r"\b(0x[0-9a-fA-F]+|\d+)[uUlL]+\b", r"\1", value)
        value = re.sub(r"\b0x([0-9a-fA-F]+)\b", r"int(z'\1', c_int)", value)
        names = re.findall(r"\b[A-Za-z_]\w*\b", re.sub(r"int\(z'\w+', c_int\)", "", value))
        if not re.fullmatch(r"[\w\s()*+\-,']+", value) or \
                [n for n in names if not n.startswith("PCNN_")]:
            # Built from the C compiler's or MPI's macros: nothing Fortran can use.
            defines.append((m.group(1), None))
            continue
        defines.append((m.group(1), value))
    body = "\n".join(l for l in src.splitlines() if not l.lstrip().startswith("#"))
    for decl in re.findall(r"PCNN_API\s+([^;]*?)\s*;", body, re.S):
        m = re.fullmatch(r"(.*?)\b(\w+)\s*\((.*)\)", " ".join(decl.split()))
        functions.append((m.group(2), m.group(1).strip(), split_args(m.group(3))))
    for ret, name, args in re.findall(r"typedef\s+([\w\s]+?)\s*\(\s*\*\s*(\w+)\s*\)\s*\((.*?)\)\s*;",
                                      body, re.S):
        callbacks.append((name, " ".join(ret.split()), split_args(" ".join(args.split()))))
    return enums, defines, functions, callbacks


def split_args(text):
    if text.strip() in ("", "void"):
        return []
    args = []
    for a in text.split(","):
        m = re.fullmatch(r"\s*(.*?)\s*(\w+)\s*", a)
        args.append((m.group(2), m.group(1)))
    return args


def map_arg(func, name, ctype, callbacks, in_callback=False):
    """(declaration without the name, kinds to import) for one argument."""
    t = ctype.replace("const ", "").strip()
    stars = t.count("*")
    base = t.replace("*", "").strip()
    opt = ", optional" if not in_callback else ""
    if base in callbacks and stars == 0:
        return "type(c_funptr), value", {"c_funptr"}
    if (base in HANDLES and stars == 1) or (base == "void" and stars == 1):
        return "type(c_ptr), value", {"c_ptr"}
    if base in HANDLES and stars == 2:
        return "type(c_ptr)" + opt, {"c_ptr"}
    if base == "char" and stars == 1:
        if in_callback:
            return "type(c_ptr), value", {"c_ptr"}
        return "character(kind=c_char), dimension(*)" + opt, {"c_char"}
    if base == "char" and stars == 2:
        return "type(c_ptr)" + opt, {"c_ptr"}
    if base.startswith("pcnn_"):  # an enum
        base = "int"
    if base not in SCALARS:
        raise Unmapped(f"{func}: argument {name} of type '{ctype}'")
    ftype, kind = SCALARS[base]
    if stars == 0:
        return ftype + ", value", {kind}
    if stars == 1 and base in ARRAYS and name not in SCALAR_NAMES:
        return ftype + ", dimension(*)" + opt, {kind}
    if stars == 1:
        return ftype + opt, {kind}
    raise Unmapped(f"{func}: argument {name} of type '{ctype}'")


def map_return(func, ret):
    if ret == "void":
        return None, set()
    if ret == "const char *":
        return "type(c_ptr)", {"c_ptr"}
    base = "int" if ret.startswith("pcnn_") else ret
    if base not in SCALARS:
        raise Unmapped(f"{func}: return type '{ret}'")
    ftype, kind = SCALARS[base]
    return ftype, {kind}


def wrap(line, indent):
    """Free-form continuation lines within LINE columns."""
    out = []
    while len(line) > LINE:
        cut = line.rfind(" ", indent + 8, LINE - 2)
        if cut < 0:
            break
        out.append(line[:cut] + " &")
        line = " " * (indent + 4) + line[cut + 1:]
    out.append(line)
    return out


def procedure(name, bind_name, ret, args, callbacks, abstract=False, indent=4):
    rtype, kinds = map_return(name, ret)
    decls = []
    for arg, ctype in args:
        d, k = map_arg(name, arg, ctype, callbacks, in_callback=abstract)
        kinds |= k
        decls.append(f"{d} :: {arg}")
    kind_word = "function" if rtype else "subroutine"
    arglist = ", ".join(a for a, _ in args)
    bind = "bind(c)" if abstract else f"bind(c, name='{bind_name}')"
    pad = " " * indent
    lines = wrap(f"{pad}{kind_word} {name}({arglist}) {bind}", indent)
    lines.append(f"{pad}  import :: {', '.join(sorted(kinds))}")
    lines += [f"{pad}  {d}" for d in decls]
    if rtype:
        lines.append(f"{pad}  {rtype} :: {name}")
    lines.append(f"{pad}end {kind_word} {name}")
    return lines


HELPERS = """\
  ! A C string (NUL-terminated, e.g. from a `const char **` output) as a
  ! Fortran string; '' for a null pointer.
  function pcnn_f_string(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer :: n
    if (.not. c_associated(p)) then
      s = ''
      return
    end if
    n = int(pcnn_strlen_c(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: s)
    s = transfer(chars(1:n), s)
  end function pcnn_f_string

  ! A Fortran string for an argument of type character(kind=c_char),
  ! dimension(*): trailing blanks removed, NUL appended.
  function pcnn_c_string(s) result(c)
    character(len=*), intent(in) :: s
    character(kind=c_char, len=:), allocatable :: c
    c = trim(s) // c_null_char
  end function pcnn_c_string

  ! A readable name for a status ("invalid argument", ...).
  function pcnn_status_str(status) result(s)
    integer(c_int), intent(in) :: status
    character(len=:), allocatable :: s
    s = pcnn_f_string(pcnn_status_str_c(status))
  end function pcnn_status_str

  ! The message of the last failed call of this thread ('' if none).
  function pcnn_last_error() result(s)
    character(len=:), allocatable :: s
    s = pcnn_f_string(pcnn_last_error_c())
  end function pcnn_last_error

  ! The loaded library's version, "MAJOR.MINOR.PATCH".
  function pcnn_version_string() result(s)
    character(len=:), allocatable :: s
    s = pcnn_f_string(pcnn_version_string_c())
  end function pcnn_version_string
"""


def generate(header_text, header_name="include/pcnn.h"):
    enums, defines, functions, callbacks = parse(header_text)
    cb_names = {name for name, _, _ in callbacks}
    procs = {name.lower() for name, _, _ in functions} | {n.lower() for n in cb_names}
    constants = [m for _, members in enums for m, _ in members] + [n for n, _ in defines]
    for c in constants:
        if c.lower() in procs and c not in RENAMED:
            raise Unmapped(f"{c} is also a function's name in Fortran (case-insensitive): "
                           "add it to RENAMED")

    def const(text):
        return re.sub(r"\w+", lambda m: RENAMED.get(m.group(0), m.group(0)), str(text))
    out = [
        f"! The Fortran module of libpcnn: ISO_C_BINDING interfaces to {header_name}.",
        "! GENERATED by scripts/gen_fortran.py from the header: do not edit; run",
        "!   scripts/gen_fortran.py -o bindings/fortran/pcnn.f90",
        "! after changing the header (the fortran_module test fails until then).",
        "! The header's comments document every function; scripts/gen_fortran.py",
        "! says how C types map to Fortran.",
        "module pcnn",
        "  use, intrinsic :: iso_c_binding",
        "  implicit none",
        "",
    ]
    for name, members in enums:
        out.append(f"  ! enum {name}")
        out += [f"  integer(c_int), parameter :: {const(m)} = {v}" for m, v in members]
        out.append("")
    out.append("  ! #defines")
    for n, v in defines:
        if v is None:
            out.append(f"  ! {n}: not bound (built from C or MPI macros)")
        elif v.startswith('"'):
            out.append(f"  character(len=*), parameter :: {const(n)} = {v}")
        else:
            out += wrap(f"  integer(c_int), parameter :: {const(n)} = {const(v)}", 2)
    out += ["", "  ! Callback types: write the procedures you pass bind(c), with these",
            "  ! interfaces, and pass c_funloc(procedure).", "  abstract interface"]
    for name, ret, args in callbacks:
        out += procedure(name, name, ret, args, cb_names, abstract=True)
    out += ["  end interface", "", "  interface"]
    skipped = []
    for name, ret, args in functions:
        if name in SKIPPED:
            skipped.append(f"  ! {name}: not bound: {SKIPPED[name]}")
            continue
        fname = name + "_c" if name in STRING_RETURNS else name
        out += procedure(fname, name, ret, args, cb_names)
    out += procedure("pcnn_strlen_c", "strlen", "size_t", [("s", "void *")], cb_names)
    out += ["  end interface", ""] + skipped + ["", "contains", "", HELPERS.rstrip("\n"),
                                                  "end module pcnn", ""]
    return "\n".join(out)


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description="Generate the Fortran module pcnn from pcnn.h.")
    p.add_argument("--header", default=os.path.join(here, "..", "include", "pcnn.h"))
    p.add_argument("-o", "--output", help="write here (default: stdout)")
    p.add_argument("--check", metavar="FILE", help="exit 1 if FILE differs from the generated text")
    p.add_argument("--check-ctypes", metavar="FILE",
                   help="also check the Python binding's table (scripts/gen_ctypes.py)")
    a = p.parse_args(argv)
    if a.check_ctypes:
        sys.path.insert(0, here)
        import gen_ctypes
        if gen_ctypes.main(["--header", a.header, "--check", a.check_ctypes]):
            return 1
    with open(a.header) as f:
        try:
            text = generate(f.read())
        except Unmapped as e:
            print(f"gen_fortran: {e}: teach scripts/gen_fortran.py this type", file=sys.stderr)
            return 1
    if a.check:
        with open(a.check) as f:
            if f.read() != text:
                print(f"gen_fortran: {a.check} is stale: run scripts/gen_fortran.py -o {a.check}",
                      file=sys.stderr)
                return 1
        return 0
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
