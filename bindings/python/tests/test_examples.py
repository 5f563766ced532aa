"""examples/plot_curves.py on the CSV layout of every example: the headers
are read from the examples' sources, so a changed CSV is tested as it is."""
import glob
import importlib.util
import os
import re

import pytest

from conftest import REPO

EXAMPLES = os.path.join(REPO, "examples")


def load_plot_curves():
    spec = importlib.util.spec_from_file_location("plot_curves",
                                                  os.path.join(EXAMPLES, "plot_curves.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def csv_headers():
    """{example: header} from every example that writes a CSV."""
    out = {}
    for path in sorted(glob.glob(os.path.join(EXAMPLES, "*.c"))):
        for h in re.findall(r'"((?:method|epoch|step),[a-z_0-9,]+?)(?:\\n)?"', open(path).read()):
            out[os.path.basename(path)] = h
    py = open(os.path.join(EXAMPLES, "fashion_mnist.py")).read()
    row = re.search(r"rows\.append\(dict\((.*?)\)\)", py, re.S).group(1)
    out["fashion_mnist.py"] = ",".join(re.findall(r"(\w+)=", row))
    return out


def fixture_rows(header, n=6):
    """Rows a run could write: a text column gets two methods, counters
    count, the rest fall; one empty and one nan cell."""
    names = header.split(",")
    rows = []
    for method in (("fixed", "adaptive") if "method" in names else ("",)):
        for i in range(n):
            cells = []
            for name in names:
                if name == "method":
                    cells.append(method)
                elif name in ("epoch", "step"):
                    cells.append(str((i + 1) * (100 if name == "step" else 1)))
                elif name == "batch":
                    cells.append(str(32 * 2 ** (i // 2)))
                else:
                    cells.append("%.5f" % (2.0 / (i + 1) + (0.1 if method == "fixed" else 0)))
            rows.append(cells)
    rows[1][-1] = ""
    rows[2][-1] = "nan"
    return [names] + rows


def test_every_example_csv_is_plotted(tmp_path):
    pc = load_plot_curves()
    headers = csv_headers()
    # every example that trains writes curves, adaptive_batch with a method column
    assert {"fashion_mnist.c", "fashion_mnist.py", "edsr_superres.c", "insitu_gray_scott.c",
            "adaptive_batch.c"} <= set(headers), headers
    for name, header in headers.items():
        path = tmp_path / (name + ".csv")
        path.write_text("\n".join(",".join(r) for r in fixture_rows(header)) + "\n")
        x, panels = pc.curves(str(path))
        names = header.split(",")
        assert x == ("epoch" if "epoch" in names else "step"), name
        plotted = {label.split(" (")[0] for lines in panels.values() for label, _, _ in lines}
        expected = {n.replace("_", " ") for n in names
                    if n not in ("method", x) and not n.endswith("seconds")}
        assert plotted == expected, (name, plotted, expected)
        if "method" in names:  # one line per method in each panel
            assert all(len(lines) % 2 == 0 for lines in panels.values())
            labels = [l for lines in panels.values() for l, _, _ in lines]
            assert any("(fixed)" in l for l in labels) and any("(adaptive)" in l for l in labels)
            xs = panels["loss"][0][1]
            assert xs == [1, 2, 3, 4, 5, 6]
        for lines in panels.values():
            for _, xs, ys in lines:
                assert len(xs) == len(ys) and all(isinstance(v, float) for v in ys)


def test_bad_csv_and_usage(tmp_path, capsys):
    pc = load_plot_curves()
    empty = tmp_path / "empty.csv"
    empty.write_text("epoch,loss\n")
    assert pc.main(["plot_curves.py", str(empty), str(tmp_path / "x.png")]) == 1
    assert "no data rows" in capsys.readouterr().err
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("epoch,loss\n1,2\n2\n")
    assert pc.main(["plot_curves.py", str(ragged), str(tmp_path / "x.png")]) == 1
    assert "row 3 has 1 cells" in capsys.readouterr().err
    assert pc.main(["plot_curves.py", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage:")
    assert pc.main(["plot_curves.py"]) == 2


def test_png_written(tmp_path):
    pytest.importorskip("matplotlib")
    pc = load_plot_curves()
    path = tmp_path / "a.csv"
    path.write_text("\n".join(",".join(r) for r in fixture_rows(csv_headers()["adaptive_batch.c"])))
    out = tmp_path / "a.png"
    assert pc.main(["plot_curves.py", str(path), str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
