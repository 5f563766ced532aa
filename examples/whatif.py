#!/usr/bin/python3
"""Plot the what-if CSV of examples/whatif.c as a PNG.

usage: /usr/bin/python3 examples/whatif.py WHATIF.csv OUT.png [--metric efficiency|step]

One panel per model and exchange strategy; x: ranks (log2), y: weak-scaling
efficiency T(1)/T(P) in percent (default) or the predicted step time (log);
one line per link speed.  Uses matplotlib when installed, else draws the
PNG itself (zlib + a 5x7 pixel font), so it runs with a bare python3.
"""
import csv
import math
import struct
import sys
import zlib

COLORS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189)]


def load(path):
    with open(path, newline='') as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f'{path}: no data rows')
    panels = {}
    for r in rows:
        key = (r['model'], r['strategy'])
        panels.setdefault(key, {}).setdefault(float(r['link_gbits']), []).append(
            (int(r['ranks']), float(r['efficiency']) * 100, float(r['step_s'])))
    return panels


def with_matplotlib(panels, out, metric):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    models = sorted({k[0] for k in panels})
    strategies = sorted({k[1] for k in panels})
    fig, axes = plt.subplots(len(models), len(strategies), squeeze=False,
                             figsize=(4 * len(strategies), 3 * len(models)))
    for i, mname in enumerate(models):
        for j, s in enumerate(strategies):
            ax = axes[i][j]
            for link, pts in sorted(panels.get((mname, s), {}).items()):
                pts.sort()
                ys = [p[1] if metric == 'efficiency' else p[2] for p in pts]
                ax.plot([p[0] for p in pts], ys, marker='o', markersize=2, label=f'{link:g} Gbit/s')
            ax.set_xscale('log', base=2)
            if metric == 'step':
                ax.set_yscale('log')
            ax.set_title(f'{mname} / {s}', fontsize=9)
            ax.set_xlabel('ranks')
            ax.set_ylabel('efficiency %' if metric == 'efficiency' else 'step s')
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


# ---- A bare PNG plotter: 5x7 glyphs for the characters the labels use. ----
FONT = {
    '0': '01110100011001110101110011000101110', '1': '00100011000010000100001000010001110',
    '2': '01110100010000100010001000100011111', '3': '11111000100010000010000011000101110',
    '4': '00010001100101010010111110001000010', '5': '11111100001111000001000011000101110',
    '6': '00110010001000011110100011000101110', '7': '11111000010001000100010000100001000',
    '8': '01110100011000101110100011000101110', '9': '01110100011000101111000010001001100',
    '.': '00000000000000000000000000110001100', '%': '11000110010001000100010000100110011',
    '/': '00000000010001000100010001000000000', '_': '00000000000000000000000000000011111',
    '-': '00000000000000011111000000000000000', ' ': '0' * 35, '(': '00010001000100001000010000010000010',
    ')': '01000001000001000010000100010001000', ':': '00000011000110000000011000110000000',
}
for ch, bits in {
    'a': '00000000000111000001011111000101111', 'b': '10000100001011011001100011000111110',
    'c': '00000000000111010000100001000101110', 'd': '00001000010110110011100011000101111',
    'e': '00000000000111010001111111000001110', 'f': '00110010010100011100010000100001000',
    'g': '00000011111000110001011110000101110', 'h': '10000100001011011001100011000110001',
    'i': '00100000000110000100001000010001110', 'k': '10000100001001010100110001010010010',
    'l': '01100001000010000100001000010001110', 'm': '00000000001101010101101011000110001',
    'n': '00000000001011011001100011000110001', 'o': '00000000000111010001100011000101110',
    'p': '00000000001111010001111101000010000', 'r': '00000000001011011001100001000010000',
    's': '00000000000111010000011100000111110', 't': '01000010001110001000010000100100110',
    'u': '00000000001000110001100011001101101', 'v': '00000000001000110001100010101000100',
    'w': '00000000001000110001101011010101010', 'x': '00000000001000101010001000101010001',
    'y': '00000000001000110001011110000101110', 'z': '00000000001111100010001000100011111',
    'G': '01110100011000010111100011000101111', 'P': '11110100011000111110100001000010000',
    'T': '11111001000010000100001000010000100', 'j': '00010000000011000010000101001001100',
}.items():
    FONT[ch] = bits


class Canvas:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.px = bytearray(b'\xff' * (w * h * 3))

    def dot(self, x, y, c):
        if 0 <= x < self.w and 0 <= y < self.h:
            i = (y * self.w + x) * 3
            self.px[i:i + 3] = bytes(c)

    def line(self, x0, y0, x1, y1, c, thick=1):
        n = max(abs(x1 - x0), abs(y1 - y0), 1)
        for k in range(n + 1):
            x = round(x0 + (x1 - x0) * k / n)
            y = round(y0 + (y1 - y0) * k / n)
            for dx in range(thick):
                for dy in range(thick):
                    self.dot(x + dx, y + dy, c)

    def text(self, x, y, s, c=(0, 0, 0)):
        for ch in s:
            bits = FONT.get(ch, FONT.get(ch.lower(), FONT[' ']))
            for r in range(7):
                for col in range(5):
                    if bits[r * 5 + col] == '1':
                        self.dot(x + col, y + r, c)
            x += 6

    def save(self, path):
        raw = b''.join(b'\x00' + bytes(self.px[y * self.w * 3:(y + 1) * self.w * 3])
                       for y in range(self.h))

        def chunk(tag, data):
            return (struct.pack('>I', len(data)) + tag + data +
                    struct.pack('>I', zlib.crc32(tag + data) & 0xffffffff))
        with open(path, 'wb') as f:
            f.write(b'\x89PNG\r\n\x1a\n')
            f.write(chunk(b'IHDR', struct.pack('>IIBBBBB', self.w, self.h, 8, 2, 0, 0, 0)))
            f.write(chunk(b'IDAT', zlib.compress(raw, 9)))
            f.write(chunk(b'IEND', b''))


def bare(panels, out, metric):
    models = sorted({k[0] for k in panels})
    strategies = sorted({k[1] for k in panels})
    pw, ph, ml, mb, mt = 300, 220, 46, 26, 20
    cv = Canvas(pw * len(strategies), ph * len(models))
    for i, mname in enumerate(models):
        for j, s in enumerate(strategies):
            ox, oy = j * pw, i * ph
            x0, x1, y0, y1 = ox + ml, ox + pw - 10, oy + ph - mb, oy + mt
            series = panels.get((mname, s), {})
            ranks = [p[0] for pts in series.values() for p in pts] or [1, 2]
            lx0, lx1 = math.log2(min(ranks)), max(math.log2(max(ranks)), 1)
            if metric == 'efficiency':
                ylo, yhi, fy = 0.0, 100.0, (lambda v: v)
            else:
                vals = [p[2] for pts in series.values() for p in pts] or [1e-3, 1]
                ylo, yhi = math.floor(math.log10(min(vals))), math.ceil(math.log10(max(vals)))
                yhi = max(yhi, ylo + 1)
                fy = (lambda v: math.log10(v))

            def X(r):
                return round(x0 + (math.log2(r) - lx0) / (lx1 - lx0) * (x1 - x0))

            def Y(v):
                return round(y0 - (fy(v) - ylo) / (yhi - ylo) * (y0 - y1))
            cv.line(x0, y0, x1, y0, (0, 0, 0))
            cv.line(x0, y0, x0, y1, (0, 0, 0))
            for e in range(int(lx0), int(lx1) + 1, 2):
                cv.line(X(2 ** e), y0, X(2 ** e), y0 + 3, (0, 0, 0))
                cv.text(X(2 ** e) - 6, y0 + 6, str(2 ** e) if e < 10 else f'{2 ** e // 1024}k')
            ticks = [0, 25, 50, 75, 100] if metric == 'efficiency' else range(int(ylo), int(yhi) + 1)
            for t in ticks:
                v = t if metric == 'efficiency' else 10.0 ** t
                cv.line(x0 - 3, Y(v), x1, Y(v), (225, 225, 225))
                cv.text(ox + 2, Y(v) - 3, f'{t}%' if metric == 'efficiency' else f'1e{t}')
            cv.text(x0 + 4, oy + 4, f'{mname} {s}'[:40])
            for k, (link, pts) in enumerate(sorted(series.items())):
                pts.sort()
                c = COLORS[k % len(COLORS)]
                ys = [p[1] if metric == 'efficiency' else p[2] for p in pts]
                for a in range(len(pts) - 1):
                    cv.line(X(pts[a][0]), Y(ys[a]), X(pts[a + 1][0]), Y(ys[a + 1]), c, 2)
                cv.line(x1 - 70, y1 + 8 + 10 * k, x1 - 60, y1 + 8 + 10 * k, c, 2)
                cv.text(x1 - 56, y1 + 5 + 10 * k, f'{link:g} Gbit')
    cv.save(out)


def main(argv):
    args = [a for a in argv[1:] if not a.startswith('--')]
    if '--help' in argv or '-h' in argv:
        print(__doc__)
        return
    metric = 'efficiency'
    if '--metric' in argv:
        metric = argv[argv.index('--metric') + 1]
        args = [a for a in args if a != metric]
    if len(args) != 2 or metric not in ('efficiency', 'step'):
        sys.exit(__doc__)
    panels = load(args[0])
    try:
        import matplotlib  # noqa: F401
        with_matplotlib(panels, args[1], metric)
    except ImportError:
        bare(panels, args[1], metric)
    print(f'wrote {args[1]}')


if __name__ == '__main__':
    main(sys.argv)
