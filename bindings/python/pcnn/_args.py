"""Scalar arguments checked before ctypes converts them.

ctypes converts a Python int to a C integer by keeping its low bits, so
2**32 + 4 passed as an `int` arrives as 4, and -1 as a `size_t` as
2**64 - 1; a finite float beyond float32 becomes inf; a path is cut at its
first NUL byte.  checked() wraps a ctypes function so that every integer,
float and string argument is checked against its C type first: integers
out of range raise OverflowError, floats beyond float32 OverflowError,
strings with a NUL ValueError.  Integer-like objects (numpy integers,
anything with __index__) are converted to int; anything else is left to
ctypes, which raises its own ArgumentError for a wrong type.
"""
import ctypes
import math
import operator

_FLOAT_MAX = 3.4028234663852886e38

# C integer types of the prototypes and their ranges.
_INT_RANGES = {}
for _t in (ctypes.c_int, ctypes.c_uint, ctypes.c_long, ctypes.c_size_t, ctypes.c_uint64):
    _bits = 8 * ctypes.sizeof(_t)
    _signed = _t(-1).value == -1
    _INT_RANGES[_t] = ((-(1 << (_bits - 1)), (1 << (_bits - 1)) - 1) if _signed
                       else (0, (1 << _bits) - 1))
_C_NAMES = {ctypes.c_int: "int", ctypes.c_uint: "unsigned", ctypes.c_long: "long",
            ctypes.c_size_t: "size_t", ctypes.c_uint64: "uint64_t"}


def _plan(argtypes):
    """(index, kind, lo, hi, C name) for each argument that needs a check."""
    plan = []
    for i, t in enumerate(argtypes):
        if t in _INT_RANGES:
            lo, hi = _INT_RANGES[t]
            plan.append((i, "int", lo, hi, _C_NAMES[t]))
        elif t is ctypes.c_float:
            plan.append((i, "float", -_FLOAT_MAX, _FLOAT_MAX, "float"))
        elif t is ctypes.c_char_p:
            plan.append((i, "str", 0, 0, "const char *"))
    return tuple(plan)


def _fix(name, plan, args):
    """args with integer-likes made ints, or an exception for a value the C
    type cannot hold."""
    args = list(args)
    for i, kind, lo, hi, cname in plan:
        if i >= len(args):
            continue  # ctypes reports the wrong argument count
        a = args[i]
        if kind == "int":
            if isinstance(a, float) or a is None:
                continue  # a wrong type: ctypes says so
            try:
                a = operator.index(a)
            except TypeError:
                continue
            if not lo <= a <= hi:
                raise OverflowError("%s: argument %d is %d, outside the range of C %s [%d, %d]"
                                    % (name, i + 1, a, cname, lo, hi))
            args[i] = a
        elif kind == "float":
            if isinstance(a, (int, float)) and math.isfinite(a) and not lo <= a <= hi:
                raise OverflowError("%s: argument %d is %r, beyond the float32 range (+-%g)"
                                    % (name, i + 1, a, hi))
        elif isinstance(a, (bytes, bytearray)) and b"\0" in a:
            raise ValueError("%s: argument %d (a path or name) contains a NUL byte at offset "
                             "%d; C would read only what comes before it"
                             % (name, i + 1, bytes(a).index(b"\0")))
    return args


def checked(fn, name, argtypes):
    """fn, or a function that checks its scalar arguments and calls fn."""
    plan = _plan(argtypes)
    if not plan:
        return fn
    ints = tuple((i, lo, hi) for i, kind, lo, hi, _ in plan if kind == "int")
    others = len(ints) != len(plan)

    def call(*args):
        # The common case, plain ints in range, costs one comparison each.
        if not others:
            try:
                for i, lo, hi in ints:
                    a = args[i]
                    if type(a) is not int or not lo <= a <= hi:
                        break
                else:
                    return fn(*args)
            except IndexError:
                return fn(*args)
        return fn(*_fix(name, plan, args))

    call.__name__ = name
    call.__wrapped__ = fn
    return call


def path(p, what):
    """A path (str, bytes or os.PathLike) as bytes for C; ValueError if it
    holds a NUL byte (C would open the part before it)."""
    import os
    b = os.fsencode(p)
    if b"\0" in b:
        raise ValueError("%s: the path %r contains a NUL byte; C would use only %r"
                         % (what, p, b.split(b"\0", 1)[0].decode("utf-8", "replace")))
    return b
