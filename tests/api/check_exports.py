"""The shared library exports exactly the functions include/pcnn.h declares:
nothing outside the pcnn_ prefix, nothing undeclared, nothing missing.
Usage: check_exports.py LIBPCNN_SO PCNN_H [--allow-debug]
--allow-debug: a -Dfault_injection=true build also exports pcnn_debug_*."""
import re
import subprocess
import sys

lib, header = sys.argv[1], sys.argv[2]
allow_debug = '--allow-debug' in sys.argv[3:]
out = subprocess.run(['nm', '-D', '--defined-only', lib], check=True, capture_output=True,
                     text=True).stdout
exported = {line.split()[-1] for line in out.splitlines()
            if len(line.split()) >= 3 and line.split()[1] in 'TDBRW'}
exported -= {'_init', '_fini', '_edata', '_end', '__bss_start'}
if allow_debug:
    exported = {name for name in exported if not name.startswith('pcnn_debug_')}
declared = set(re.findall(r'PCNN_API\s+[\w\s\*]*?\b(pcnn_\w+)\s*\(', open(header).read()))

problems = []
for name in sorted(exported - declared):
    problems.append('exported but not declared in pcnn.h: ' + name)
for name in sorted(declared - exported):
    problems.append('declared in pcnn.h but not exported: ' + name)
print('%d functions declared, %d symbols exported' % (len(declared), len(exported)))
for p in problems:
    print('FAIL', p)
if not declared:
    print('FAIL no declarations found (parser broken?)')
    sys.exit(1)
sys.exit(1 if problems else 0)
