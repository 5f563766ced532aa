"""The network options as the loaded libpcnn describes them
(pcnn_net_option_info): names, inclusive ranges and integer-ness, read once
per library, so that the binding keeps no copy of them."""
import collections
from ctypes import byref, c_char_p, c_double, c_int

from .enums import Option, coerce
from .errors import InvalidArgumentError, UnsupportedError

OptionInfo = collections.namedtuple("OptionInfo", "value name min max is_integer")


def describe(lib):
    """Every option `lib` knows, in order of value (options are numbered
    from 0 without gaps: the first value it refuses ends the list).  Empty
    for a library older than pcnn_net_option_info."""
    table = getattr(lib, "_options", None)
    if table is None:
        table = []
        lo, hi, integer, name = c_double(), c_double(), c_int(), c_char_p()
        while True:
            try:
                lib.pcnn_net_option_info(len(table), byref(lo), byref(hi), byref(integer),
                                         byref(name))
            except (InvalidArgumentError, UnsupportedError):
                break
            table.append(OptionInfo(len(table), name.value.decode(), lo.value, hi.value,
                                    bool(integer.value)))
        lib._options = table
    return table


def resolve(lib, option, what):
    """An option's value from a pcnn.Option, an int, or a name as the
    library spells it (case-insensitive, '-' for '_')."""
    table = describe(lib)
    if not isinstance(option, str) or not table:
        return coerce(option, Option, what)
    key = option.strip().lower().replace("-", "_")
    for info in table:
        if info.name == key:
            try:
                return Option(info.value)
            except ValueError:  # newer than this binding's enum
                return info.value
    raise InvalidArgumentError("%s: unknown option %r (one of: %s)"
                               % (what, option, ", ".join(i.name for i in table)))


def is_integer(lib, option):
    """Whether `lib` keeps `option` (a value it knows) as an integer."""
    table = describe(lib)
    return 0 <= option < len(table) and table[option].is_integer
