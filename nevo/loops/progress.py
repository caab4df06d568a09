"""Progress display: a live status line on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
import time


def _human(x: float) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.2f}{unit}"
    return f"{x:.0f}"


def _number(x: float, width: int, digits: int) -> str:
    """x in `width` characters, or a dash while there is none yet (NaN: nothing validated)."""
    return f"{x:{width}.{digits}f}" if x == x else "-".rjust(width)


def _duration(s: float) -> str:
    if s != s or s == float("inf"):
        return "?"
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class Progress:
    """Generation, frames, frames/s, elite score and ETA to the frame budget, in the run's own words
    once `counts` has named them (an Atari run's game frames, a gymnasium task's agent steps)."""

    def __init__(self, budget: int, stream=None, label: str = ""):
        self.stream = stream or sys.stdout
        self.label = f"{label} | " if label else ""  # before each line: a suite's game and what is left
        self.tty = self.stream.isatty()
        self.budget = budget
        self.frames_before = 0
        self.phase = ""
        self.generation = 0
        self.elite = float("nan")
        self.accuracy = float("nan")  # the last validation's test accuracy (labelled data sets)
        self.t0 = time.monotonic()
        self.rate = float("nan")
        self.counted, self.unit = "frames", "gen"

    def counts(self, frames: str, unit: str) -> None:
        """Names what the lines count: frames the kind's (Kind.FRAMES: "game frames", "agent steps",
        "examples"; its last word), unit the step's ("generation" is shown as "gen")."""
        self.counted, self.unit = frames.split()[-1], "gen" if unit == "generation" else unit

    def start_phase(self, generation: int, phase: str, frames_before: int) -> None:
        self.generation, self.phase, self.frames_before = generation, phase, frames_before
        self.phase_t0 = time.monotonic()

    def episodes(self, done: int, total: int, frames: int) -> None:
        """Called by the evaluator while it runs; redraws the status line on a terminal."""
        if not self.tty:
            return
        dt = time.monotonic() - self.phase_t0
        rate = frames / dt if dt > 0 else 0.0
        left = max(self.budget - self.frames_before - frames, 0)
        line = (
            f"{self.label}{self.unit} {self.generation} {self.phase} {done}/{total} eps | "
            f"{_human(self.frames_before + frames)} {self.counted} | {_human(rate)} {self.counted}/s | "
            f"elite {self.elite:.1f} | ETA {_duration(left / rate if rate > 0 else float('nan'))}"
        )
        self.stream.write("\r\033[K" + line)
        self.stream.flush()

    def generation_done(self, row: dict) -> None:
        """One permanent line per generation."""
        self.elite = row.get("score/elite_mean", self.elite)  # absent: this generation skipped it
        self.accuracy = row.get("score/test_accuracy", self.accuracy)  # a labelled data set's
        self.rate = row["perf/frames_per_s"]
        left = max(self.budget - row["frames"], 0)
        accuracy = (
            f"test acc {_number(100 * self.accuracy, 6, 2)}% | " if "score/train_accuracy" in row else ""
        )
        line = (
            f"{self.label}{self.unit} {row['generation']:4d} | {self.counted} {_human(row['frames']):>8} | "
            f"{_human(self.rate):>7} {self.counted}/s | pop max {row['score/pop_max']:8.1f} "
            f"mean {row['score/pop_mean']:8.1f} | elite {_number(self.elite, 8, 1)} | {accuracy}"
            f"ETA {_duration(left / self.rate if self.rate > 0 else float('nan'))}"
        )
        self.stream.write(("\r\033[K" if self.tty else "") + line + "\n")
        self.stream.flush()

    def say(self, text: str) -> None:
        self.stream.write(("\r\033[K" if self.tty else "") + text + "\n")
        self.stream.flush()
