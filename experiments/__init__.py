"""The experiment suite: one module per experiment (fig15.py ... table1.py, efficiency.py, the
output-window experiments windows.py, piv.py, autocorr.py, window_table.py, and the normalized
ones zncc_frames.py, zncc_match.py, zncc_autocorr.py, and the one-dimensional signals
signals_seed004.py, signals_matched.py, signals_ambient.py, and the reductions,
reductions.py), each defining EXPERIMENT (an Experiment of xcsuite/spec.py, the suite's data
model; _windows.py and _signals.py hold series that several definitions share). `load(name)` and
`load_all()` find them; the order of `ORDER` is the order in which python -m xcsuite run-experiments runs them."""
from __future__ import annotations

import importlib
import pkgutil

from xcsuite.spec import Experiment

# The output-window experiments: not the paper's evaluation. The pages that set our
# results beside the paper's (claims, anchors) read every other experiment, and full outputs only.
WINDOW_EXPERIMENTS = ("windows", "piv", "autocorr", "window_table")
# The normalized experiments (ZNCC, zero-lag): another quantity than the paper's raw
# correlation, so the paper pages leave them out too.
NORMALIZED_EXPERIMENTS = ("zncc_frames", "zncc_match", "zncc_autocorr")
# The one-dimensional signals (seed 004's case, matched filtering, ambient noise): 1 x n
# matrices, not the paper's squares (seed 004's full-output companion has no shifts segment, so the
# paper pages must leave them out by name).
SIGNAL_EXPERIMENTS = ("signals_seed004", "signals_matched", "signals_ambient")
# The reductions (peaks, the maximum over the rights), measured through the Python package
# against the map and PyTorch: not the paper's correlation maps.
REDUCTION_EXPERIMENTS = ("reductions",)
# Every experiment that claims and anchors do not read.
NOT_PAPER_EXPERIMENTS = WINDOW_EXPERIMENTS + NORMALIZED_EXPERIMENTS + SIGNAL_EXPERIMENTS + REDUCTION_EXPERIMENTS

ORDER = ["fig15", "fig16", "fig17", "fig18", "fig19", "fig20", "nmn", "fig21", "fig22", "fig23",
         "table1", "efficiency", "windows", "piv", "autocorr", "window_table", "zncc_frames", "zncc_match", "zncc_autocorr",
         "signals_seed004", "signals_matched", "signals_ambient", "reductions"]


# The sittings of scripts/sweep-scaling --by-group: related experiments together, each group a
# few minutes of the quick suite on one GPU (on an H100: 40 s to 4 minutes), so that a group's run on
# one GPU and on all fit one command of a GPU machine lent for 10-minute commands. Within a group the
# GPUs share one pool of figure points, as in the whole suite's run.
SWEEP_GROUPS = (("fig15", "fig16", "fig17", "fig18", "fig19"), ("fig20", "nmn", "fig21", "fig22", "fig23"),
                ("table1", "efficiency"), WINDOW_EXPERIMENTS, NORMALIZED_EXPERIMENTS,
                SIGNAL_EXPERIMENTS + REDUCTION_EXPERIMENTS)


def names() -> list[str]:
    found = [m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")]
    return [n for n in ORDER if n in found] + sorted(n for n in found if n not in ORDER)


def selected(texts, known: list[str] | None = None) -> list[str]:
    """The experiment names given on a command line (each text a name or a comma-separated list), in
    order and without repeats; a ValueError naming the first unknown one, with the known ones (default:
    names()): the refusal of every command that takes experiment names (run_experiments, slurm_sweep,
    plot --only)."""
    known = names() if known is None else known
    picked = []
    for text in texts:
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            if part not in known:
                raise ValueError(f"unknown experiment {part!r} (known: {', '.join(known)})")
            picked.append(part)
    return list(dict.fromkeys(picked))


def sweep_groups() -> list[list[str]]:
    """Every experiment once, in SWEEP_GROUPS' groups (in run order); one not in a group (a user's
    new experiment) is a group of its own."""
    known = names()
    groups = [[n for n in known if n in g] for g in SWEEP_GROUPS]
    grouped = {n for g in groups for n in g}
    return [g for g in groups if g] + [[n] for n in known if n not in grouped]


def auto_order(picked: list[str]) -> tuple[list[str], list[str]]:
    """`picked` (names, in order) parted into the experiments that do not measure auto's choice and
    those that do (Experiment.measures_auto), each in the order given: scripts/reproduce runs the
    second after making auto's tables from the first's results and rebuilding with them."""
    late = [n for n in picked if load(n).measures_auto]
    return [n for n in picked if n not in late], late


def load(name: str) -> Experiment:
    mod = importlib.import_module(f"{__name__}.{name}")
    exp = getattr(mod, "EXPERIMENT", None)
    if not isinstance(exp, Experiment) or exp.name != name:
        raise ValueError(f"experiments/{name}.py must define EXPERIMENT = Experiment(name={name!r}, ...)")
    return exp


def load_all() -> list[Experiment]:
    return [load(n) for n in names()]
