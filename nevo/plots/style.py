"""Paper style for every nevo figure: readable fonts, thin lines, no decoration; PNG and PDF out."""

from __future__ import annotations

import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only: no display is needed, or wanted, on a training box

import matplotlib.pyplot as plt  # noqa: E402

# Sized for a two-column paper: 7 in wide at 8-10 pt reads like the body text.
RC = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.25,
    "grid.linewidth": 0.5,
    "lines.linewidth": 1.2,
    "legend.frameon": False,
    "savefig.bbox": "tight",
    "pdf.fonttype": 42,  # TrueType in the PDF, so editors and journals keep the text as text
}
COLORS = plt.rcParams["axes.prop_cycle"].by_key()["color"]


def paper():
    """Context in which figures are made and saved in the paper style."""
    return plt.rc_context(RC)


def figure(ncols: int, width: float = 7.0, height: float = 2.6):
    """(fig, [axes]) of ncols panels side by side; call inside paper()."""
    fig, axes = plt.subplots(1, ncols, figsize=(width, height), squeeze=False, layout="constrained")
    return fig, list(axes[0])


def save(fig, prefix: str) -> list[str]:
    """Write prefix.png (200 dpi) and prefix.pdf; return the paths."""
    os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    paths = [prefix + ".png", prefix + ".pdf"]
    with paper():
        fig.savefig(paths[0], dpi=200)
        fig.savefig(paths[1])
    return paths


def close(fig) -> None:
    plt.close(fig)


def fail(message: str) -> int:
    """Print a one-line error (no traceback) and return the CLI's exit code for bad input."""
    print(f"error: {message}", file=sys.stderr)
    return 2
