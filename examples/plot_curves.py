#!/usr/bin/python3
"""usage: /usr/bin/python3 examples/plot_curves.py CURVES.csv OUT.png

Draw the curves an example wrote as CSV into a PNG.

Works on the CSV of every example (fashion_mnist.c and .py, edsr_superres,
insitu_gray_scott, adaptive_batch).  The x axis is the first numeric
column (epoch or step).  A column of text (adaptive_batch's "method")
splits the rows into one line per value.  The other numeric columns are
grouped into panels by the last word of their name ("train_loss" and
"test_loss" share the "loss" panel); timings (names ending in "seconds")
are left out, and so are columns that are constant or empty.  A panel
whose values span more than a factor of 10 uses a log scale.  Empty cells
and "nan" are gaps.  Needs matplotlib (Debian: apt-get install
python3-matplotlib).
"""
import csv
import math
import sys


def _number(text):
    """The cell as a float: NaN for an empty cell, None for text."""
    text = text.strip()
    if text == "":
        return math.nan
    try:
        return float(text)
    except ValueError:
        return None


def curves(path):
    """(x name, {panel title: [(label, xs, ys)]}) from a CSV file."""
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    if len(rows) < 2:
        raise ValueError("%s: no data rows" % path)
    header, data = [h.strip() for h in rows[0]], rows[1:]
    for i, r in enumerate(data):
        if len(r) != len(header):
            raise ValueError("%s: row %d has %d cells, the header %d"
                             % (path, i + 2, len(r), len(header)))
    cells = {name: [_number(r[i]) for r in data] for i, name in enumerate(header)}
    text = [n for n in header if any(v is None for v in cells[n])]
    numeric = [n for n in header if n not in text]
    if not numeric:
        raise ValueError("%s: no numeric column for the x axis" % path)
    x = numeric[0]
    groups = {}  # label of the text columns' values -> row indices
    for i, r in enumerate(data):
        key = " ".join(r[header.index(n)].strip() for n in text)
        groups.setdefault(key, []).append(i)
    panels = {}
    for name in numeric[1:]:
        values = [v for v in cells[name] if not math.isnan(v)]
        if name.endswith("seconds") or not values:
            continue
        if min(values) == max(values) and len(values) > 1:
            continue  # constant: nothing to see
        title = name.split("_")[-1]
        for key, idx in groups.items():
            label = name.replace("_", " ") + (" (%s)" % key if key else "")
            panels.setdefault(title, []).append(
                (label, [cells[x][i] for i in idx], [cells[name][i] for i in idx]))
    if not panels:
        raise ValueError("%s: no column to plot" % path)
    return x, panels


def plot(x, panels, out):
    import matplotlib
    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    for ax, (title, lines) in zip(axes[0], panels.items()):
        for label, xs, ys in lines:
            ax.plot(xs, ys, marker="o", markersize=3, label=label)
        values = [v for _, _, ys in lines for v in ys if not math.isnan(v)]
        if min(values) > 0 and max(values) > 10 * min(values):
            ax.set_yscale("log")
        ax.set_xlabel(x.replace("_", " "))
        ax.set_title(title if len(lines) > 1 else lines[0][0])
        if len(lines) > 1:
            ax.legend(fontsize="small")
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv):
    if len(argv) == 2 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        x, panels = curves(argv[1])
    except (OSError, ValueError) as e:
        print("plot_curves: %s" % e, file=sys.stderr)
        return 1
    try:
        plot(x, panels, argv[2])
    except ImportError:
        print("plot_curves: matplotlib is missing (Debian: apt-get install "
              "python3-matplotlib); the curves are in %s" % argv[1], file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
