"""Look at the report: render it for 8, 40 and 130 runs, screenshot the HTML at 1400 px,
and compile a two-column paper that inputs the LaTeX report (pages as PNG).

Usage (from the repository root, PYTHONPATH=.):
    python bench/report_look.py [--out bench/scratch/look] [--sets w8,r40,r130] [--trials 200]

w8: TREC 2012 Web track, 8 runs (../shared/data/web2012); r40, r130: seeded synthetic
collections of 30 queries (the ``sample`` shape with 40 and 130 runs).  The preference and
metric tables are computed once and reused.  Needs chromium (screenshots) and
pdflatex/pdftoppm (the paper); writes only under --out (git-ignored bench/scratch/).
Not run by the tests.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WEB = ROOT.parent / "shared" / "data" / "web2012"
PAPER = r"""\documentclass[twocolumn]{article}
\usepackage[margin=0.75in]{geometry}
\usepackage{booktabs,graphicx}
\usepackage[T1]{fontenc}
\begin{document}
\title{A two-column paper with a prefeval report}\author{look}\maketitle
\section{Introduction} Lorem ipsum text of the paper. Table~\ref{tab:prefeval-summary}
summarizes; Figure~\ref{fig:prefeval-discpower} shows the discriminative power.
\input{report.tex}
\end{document}
"""


def prefeval(*args) -> None:
    subprocess.run([sys.executable, "-m", "prefeval", *map(str, args)], check=True, cwd=ROOT)


def inputs(name: str, out: Path) -> tuple[Path, list[str]]:
    if name == "w8":
        return WEB / "qrels.adhoc.txt.gz", sorted(glob.glob(str(WEB / "runs" / "*.run.gz")))
    from prefeval import synthetic

    n = int(name[1:])
    shape = f"look{n}"
    synthetic.SHAPES[shape] = dataclasses.replace(
        synthetic.SHAPES["sample"], name=shape, runs=n, queries=30
    )
    folder = out / name
    if not (folder / "qrels.txt").exists():
        synthetic.generate(folder, shape=shape, seed=7)
    return folder / "qrels.txt", sorted(glob.glob(str(folder / "runs" / "*")))


def screenshot(page: Path, png: Path, height: int) -> None:
    subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--hide-scrollbars", f"--user-data-dir={tempfile.mkdtemp()}",
         f"--window-size=1400,{height}", f"--screenshot={png}", page.as_uri()],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip


def tiles(png: Path, stem: Path, height: int = 1600) -> None:
    """The screenshot cut into 1400 x ``height`` tiles (``STEM-01.png``...), blank ends
    dropped, so each can be looked at full size."""
    from PIL import Image, ImageChops

    image = Image.open(png).convert("RGB")
    box = ImageChops.difference(image, Image.new("RGB", image.size, "white")).getbbox()
    bottom = box[3] + 20 if box else image.height
    for k, top in enumerate(range(0, bottom, height), start=1):
        image.crop((0, top, image.width, min(top + height, bottom))).save(f"{stem}-{k:02d}.png")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "bench" / "scratch" / "look"))
    ap.add_argument("--sets", default="w8,r40,r130")
    ap.add_argument("--trials", default="200")
    ap.add_argument("--height", type=int, default=12000)
    args = ap.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for name in args.sets.split(","):
        qrels, runs = inputs(name, out)
        prefs, metrics = out / f"{name}-prefs.tsv", out / f"{name}-metrics.tsv"
        if not prefs.exists():
            prefeval("compare", "-q", "-o", prefs, qrels, *runs)
            prefeval("metrics", "-q", "-o", metrics, qrels, *runs)
        given = ["--trials", args.trials]
        if name == "w8":  # from the runs: the robustness curves too
            given += ["--robustness", qrels, *runs]
        else:
            given += ["--prefs", prefs, "--metrics", metrics]
        folder = out / f"{name}-report"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        for ext in ("html", "tex", "md"):
            prefeval("report", "-o", folder / f"report.{ext}", *given)
        if shutil.which("chromium"):
            shot = out / f"{name}-html.png"
            for stale in out.glob(f"{name}-html-*.png"):
                stale.unlink()
            screenshot(folder / "report.html", shot, args.height)
            tiles(shot, out / f"{name}-html")
        if shutil.which("pdflatex"):
            (folder / "paper.tex").write_text(PAPER)
            for _ in range(2):  # twice: the references
                proc = subprocess.run(
                    ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"],
                    cwd=folder, capture_output=True, text=True,
                )  # fmt: skip
            if proc.returncode:
                print(proc.stdout[-3000:])
                return 1
            warnings = [line for line in proc.stdout.splitlines() if "Overfull" in line]
            print(name, "pdflatex:", len(warnings), "overfull boxes", *warnings[:5], sep="\n  ")
            for stale in out.glob(f"{name}-page-*.png"):
                stale.unlink()
            if shutil.which("pdftoppm"):
                subprocess.run(
                    ["pdftoppm", "-png", "-r", "80", "paper.pdf", str(out / f"{name}-page")],
                    cwd=folder, check=True,
                )  # fmt: skip
        print(name, "->", folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
