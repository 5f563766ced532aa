"""The rooms of lib/ include only rooms below them, graph/net.h stays
private to graph, and no code asks a layer what it is by name: a
comparison of a layer's kind string (strcmp with a kind literal, or
ops->kind compared) outside the kinds' own files (lib/layers/*.c that
define a layer_ops) and the checkpoint format (lib/io/checkpoint*.c,
which records kinds by name) fails -- ask the layer's caps instead
(layers/layer_caps.h).  The allowed order is written once, here: a room may
include its own files, any room on a lower level, and nothing else (rooms
on one level are independent of each other).  A new room must be placed.
Usage: check_layering.py LIB_DIR"""
import os
import re
import sys

LEVELS = [
    ['core'],              # errors, memory, hashing, byte codec, atomic files
    ['kernels'],           # GEMM, convolution kernels, layouts
    ['optim'],             # optimizer updates on flat runs
    ['data'],              # datasets and the IDX reader
    ['strategy'],          # every choice and its thresholds
    ['layers'],            # one file per layer type, the layer list
    ['profile'],           # timing breakdown and traces
    ['parallel'],          # communicator, agreement, decomposition, exchanges
    ['graph'],             # the network: build, plan, run, public calls
    ['sched', 'io', 'perf'],  # adaptive batch scheduler; checkpoints; performance model
    ['plan'],              # automatic parallel strategy over the performance model
]
LEVEL = {room: i for i, rooms in enumerate(LEVELS) for room in rooms}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
KIND_DEF = re.compile(r'\.kind\s*=\s*"([A-Za-z0-9_]+)"')
COMPARE_CALL = re.compile(r'\b(?:strn?cmp|strcasecmp|memcmp|kind_is)\s*\(')
KIND_EQUALS = re.compile(r'ops->kind\s*[=!]=|[=!]=\s*[A-Za-z_][\w>.-]*ops->kind\b')
COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)


def call_args(text, start):
    """The text of the call's arguments whose '(' ends at start."""
    depth, i = 1, start
    while i < len(text) and depth:
        depth += {'(': 1, ')': -1}.get(text[i], 0)
        i += 1
    return text[start:i - 1]


def kind_comparisons(lib):
    """Comparisons of a layer kind string outside the kinds' own files and
    the checkpoint format: (where, text)."""
    kinds, own = set(), set()
    for name in os.listdir(os.path.join(lib, 'layers')):
        path = os.path.join(lib, 'layers', name)
        if name.endswith('.c'):
            found = KIND_DEF.findall(open(path, errors='replace').read())
            kinds.update(found)
            if found:
                own.add(path)
    literal = re.compile(r'"(%s)"' % '|'.join(sorted(kinds))) if kinds else None
    found = []
    for directory, _, files in os.walk(lib):
        for name in sorted(files):
            path = os.path.join(directory, name)
            rel = os.path.relpath(path, lib)
            if not name.endswith(('.c', '.h')) or path in own:
                continue
            if rel.startswith(os.path.join('io', 'checkpoint')):
                continue
            text = COMMENT.sub(lambda m: re.sub(r'[^\n]', ' ', m.group(0)),
                               open(path, errors='replace').read())
            hits = [(m.start(), m.group(0)) for m in KIND_EQUALS.finditer(text)]
            for m in COMPARE_CALL.finditer(text):
                args = call_args(text, m.end())
                if 'ops->kind' in args or (literal and literal.search(args)):
                    hits.append((m.start(), m.group(0) + args + ')'))
            for at, what in sorted(hits):
                found.append(('%s:%d' % (rel, text.count('\n', 0, at) + 1),
                              ' '.join(what.split())))
    return kinds, found


def room_of(lib, path):
    return os.path.relpath(path, lib).split(os.sep)[0]


def main(lib):
    lib = os.path.abspath(lib)
    problems, checked = [], 0
    for directory, _, files in os.walk(lib):
        for name in sorted(files):
            if not name.endswith(('.c', '.h')):
                continue
            path = os.path.join(directory, name)
            room = room_of(lib, path)
            if room not in LEVEL:
                problems.append('%s: room "%s" has no place in the order' % (path, room))
                continue
            for number, line in enumerate(open(path, errors='replace'), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = os.path.normpath(os.path.join(directory, m.group(1)))
                if not target.startswith(lib + os.sep):
                    continue  # pcnn.h and system headers
                checked += 1
                where = '%s:%d' % (os.path.relpath(path, lib), number)
                target_room = room_of(lib, target)
                if target_room == room:
                    continue
                if target_room not in LEVEL:
                    problems.append('%s includes unknown room %s' % (where, target_room))
                elif LEVEL[target_room] >= LEVEL[room]:
                    problems.append('%s: %s may not include %s (%s)' %
                                    (where, room, target_room, m.group(1)))
                if target.endswith(os.path.join('graph', 'net.h')):
                    problems.append('%s: graph/net.h is private to graph' % where)
    print('%d includes between files of lib/ checked' % checked)
    kinds, compared = kind_comparisons(lib)
    print('%d layer kinds; %d comparisons of a kind string outside their files' %
          (len(kinds), len(compared)))
    if not kinds:
        problems.append('no layer kinds found in lib/layers (wrong directory?)')
    for where, what in compared:
        problems.append('%s compares a layer kind by name (%s): ask its caps '
                        '(layers/layer_caps.h)' % (where, what))
    for p in problems:
        print('FAIL', p)
    if checked == 0:
        print('FAIL no includes found (wrong directory?)')
        return 1
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else 'lib'))
