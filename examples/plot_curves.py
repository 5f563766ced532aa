#!/usr/bin/python3
"""Draw the curves an example wrote as CSV into a PNG.

usage: /usr/bin/python3 examples/plot_curves.py CURVES.csv OUT.png

The first column is the x axis. The other columns are grouped into panels
by the last word of their name ("train_loss" and "test_loss" share the
"loss" panel); timings (names ending in "seconds") are left out. A panel
whose values span more than a factor of 10 uses a log scale. Needs
matplotlib (Debian: apt-get install python3-matplotlib).
"""
import csv
import sys


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    with open(argv[1], newline='') as f:
        rows = list(csv.reader(f))
    if len(rows) < 2:
        sys.exit(f'{argv[1]}: no data rows')
    header, data = rows[0], rows[1:]
    columns = {name: [float(r[i]) for r in data] for i, name in enumerate(header)}
    x = header[0]
    panels = {}
    for name in header[1:]:
        if not name.endswith('seconds'):
            panels.setdefault(name.split('_')[-1], []).append(name)

    import matplotlib
    matplotlib.use('Agg')  # no display needed
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    for ax, (title, names) in zip(axes[0], panels.items()):
        for name in names:
            ax.plot(columns[x], columns[name], marker='o', markersize=3,
                    label=name.replace('_', ' '))
        values = [v for name in names for v in columns[name]]
        if min(values) > 0 and max(values) > 10 * min(values):
            ax.set_yscale('log')
        ax.set_xlabel(x.replace('_', ' '))
        ax.set_title(title if len(names) > 1 else names[0].replace('_', ' '))
        if len(names) > 1:
            ax.legend()
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(argv[2], dpi=110)


if __name__ == '__main__':
    main(sys.argv)
