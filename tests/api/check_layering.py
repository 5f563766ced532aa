"""The rooms of lib/ include only rooms below them, and graph/net.h stays
private to graph.  The allowed order is written once, here: a room may
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
    for p in problems:
        print('FAIL', p)
    if checked == 0:
        print('FAIL no includes found (wrong directory?)')
        return 1
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else 'lib'))
