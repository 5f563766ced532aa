"""Print the version that include/pcnn.h declares, so meson, pkg-config and
the soname all follow the header (the single source of truth)."""
import pathlib
import re

header = (pathlib.Path(__file__).resolve().parent.parent / 'include' / 'pcnn.h').read_text()
parts = [re.search(r'#define PCNN_VERSION_%s (\d+)' % k, header).group(1)
         for k in ('MAJOR', 'MINOR', 'PATCH')]
print('.'.join(parts))
