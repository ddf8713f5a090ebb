"""Where things live, and the GPU slug that names result and plot folders."""
from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

RESULTS = Path(os.environ.get("XCORR_RESULTS", ROOT / "results"))
PLOTS = Path(os.environ.get("XCORR_PLOTS", ROOT / "plots"))
QUICK_SUFFIX = "-quick"


def git_revision() -> str:
    """The git revision the build and these sources are from: scripts/git-revision's answer (the
    checkout's HEAD, -dirty where the sources changed; XCORR_GIT_REVISION for a copied tree), or
    "unknown". The one rule for every result's provenance (run_experiments, peerbench, the multi-GPU
    scripts, zncc-offsets)."""
    import subprocess

    try:
        r = subprocess.run([str(ROOT / "scripts" / "git-revision")], capture_output=True, text=True, timeout=30)
        return r.stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def gpu_slug(name: str) -> str:
    """'NVIDIA H200' -> 'nvidia-h200'."""
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return s or "unknown-gpu"


def add_dirs_arguments(ap) -> None:
    """The report commands' common arguments: result folders, or every GPU's (--quick: the
    quick-run folders); selected_dirs(args.dirs, args.quick) resolves them."""
    ap.add_argument("dirs", nargs="*", help="result folders (default: every GPU under results/)")
    ap.add_argument("--quick", action="store_true", help="the quick-run folders instead")


class NotAResultsFolder(Exception):
    """A folder named on a report command's line that is not one of results (the message names it)."""


def holds_results(d: Path) -> bool:
    """Whether folder d is one GPU's results: <experiment>.json files or a summary.csv."""
    return any(d.glob("*.json")) or (d / "summary.csv").exists()


def selected_dirs(given: list, quick: bool) -> list[Path]:
    """The result folders a report script works on: those named on its command line, else every
    GPU's folder under results/ (only the quick-run folders with --quick, never mixed). A named
    folder that is missing or holds no results is refused (NotAResultsFolder): reporting on it would
    say "nothing measured" and exit 0, and a misspelt folder would look like an empty GPU."""
    if given:
        dirs = [Path(d) for d in given]
        for d in dirs:
            if not d.is_dir():
                raise NotAResultsFolder(f"{d}: no such folder")
            if not holds_results(d):
                raise NotAResultsFolder(f"{d}: not a GPU's results folder (no <experiment>.json or summary.csv in it)")
        return dirs
    return [d for d in gpu_dirs(include_quick=quick) if d.name.endswith(QUICK_SUFFIX) == quick]


def gpu_dirs(results: Path = None, include_quick: bool = False) -> list[Path]:
    """Result folders, one per GPU (quick-run folders only when asked)."""
    results = Path(results or RESULTS)
    if not results.is_dir():
        return []
    out = []
    for d in sorted(results.iterdir()):
        if not d.is_dir() or d.name.startswith((".", "_")):
            continue
        if d.name.endswith(QUICK_SUFFIX) and not include_quick:
            continue
        if holds_results(d):
            out.append(d)
    return out


def plots_dir_for(gpu_dir: Path, plots: Path = None) -> Path:
    d = Path(plots or PLOTS) / Path(gpu_dir).name
    d.mkdir(parents=True, exist_ok=True)
    return d


def figure_formats() -> list[str]:
    """PNG only unless asked (--pdf, or XCORR_PLOT_FORMATS=png,pdf): the committed figures are
    PNG, so that a refresh adds little to the repository's history."""
    return [f for f in os.environ.get("XCORR_PLOT_FORMATS", "png").split(",") if f]


def save_figure(fig, out_dir: Path, name: str, dpi: int, **savefig_kw) -> list[Path]:
    """Saves `fig` as out_dir/name.<format> for every figure format, without the metadata that
    varies between runs or matplotlib versions. Each file is rendered in memory and replaces the
    old one at once (write_bytes_atomic), and only where the figure changed (same_figure): a run
    whose data changed nothing leaves every file as it was, not even touched, and a run that changed
    one experiment's results rewrites that experiment's figures alone. Returns every file of the
    figure, rewritten or not; FIGURES_WRITTEN counts the ones rewritten."""
    import io

    global FIGURES_WRITTEN
    import matplotlib
    try:
        from matplotlib.layout_engine import PlaceHolderLayoutEngine
    except ImportError:  # matplotlib before 3.6: no layout engines, nothing to remove
        PlaceHolderLayoutEngine = ()

    # fig.tight_layout() leaves a placeholder layout engine behind, one that does nothing; for any
    # engine, savefig first draws the whole figure (for the engine to lay it out), then renders it:
    # a quarter of a figure's cost spent on nothing. Without the placeholder: the same bytes. (The
    # rc settings: set_layout_engine(None) would otherwise pick the engine they name.)
    if PlaceHolderLayoutEngine and isinstance(fig.get_layout_engine(), PlaceHolderLayoutEngine):
        with matplotlib.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
            fig.set_layout_engine(None)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    files = []
    for ext in figure_formats():
        f = Path(out_dir) / f"{name}.{ext}"
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, dpi=dpi, metadata=FIXED_METADATA.get(ext, {}), **savefig_kw)
        if not same_figure(f, buf.getvalue(), ext):
            write_bytes_atomic(f, buf.getvalue())
            FIGURES_WRITTEN += 1
        files.append(f)
    return files


FIGURES_WRITTEN = 0  # files save_figure rewrote in this process (the commands' summary lines)


def same_figure(f: Path, data: bytes, ext: str) -> bool:
    """Whether file f already holds the figure rendered as `data`: the same bytes, or for a PNG the
    same pixels (another zlib or matplotlib writing the same image: its bytes may differ, the image
    does not). A file that is missing or cannot be read is not the figure."""
    try:
        old = Path(f).read_bytes()
    except OSError:
        return False
    if old == data:
        return True
    if ext != "png":
        return False
    import io

    from PIL import Image  # matplotlib's own dependency
    try:
        with Image.open(io.BytesIO(old)) as a, Image.open(io.BytesIO(data)) as b:
            return a.size == b.size and a.mode == b.mode and a.tobytes() == b.tobytes()
    except (OSError, ValueError, SyntaxError):  # not a PNG (a damaged or foreign file): rewrite it
        return False


FIXED_METADATA = {"png": {"Software": None},
                  "pdf": {"CreationDate": None, "ModDate": None, "Creator": None, "Producer": None},
                  "svg": {"Date": None, "Creator": None}}


def folder_problem(d: Path) -> str | None:
    """Why folder d cannot be made and written into, or None: a file at d or on its path (mkdir
    raised there, after the work that made what goes in it). Checked before that work."""
    d = Path(d)
    for p in (d, *d.parents):
        if p.exists():
            return None if p.is_dir() else f"{p} is a file, not a folder"
    return None


def out_file_problem(f: Path) -> str | None:
    """Why file f cannot be written, or None: f is a folder, or its folder is missing (a misspelt
    path is refused rather than made). Checked before the work that makes the file."""
    f = Path(f)
    if f.is_dir():
        return f"{f} is a folder"
    if not f.parent.is_dir():
        return folder_problem(f.parent) or f"no such folder {f.parent}"
    return None


class WriteFailed(OSError):
    """A generated file that could not be written (a full disk, a quota, a read-only folder); the
    file before it, if any, is whole. xcsuite.cli.run turns it into one line and exit status 1."""


def exit_status(main, prog: str, *args) -> int:
    """main(*args), a WriteFailed from it said in one line on stderr and exit status 1: how every
    entry point that writes generated files ends (xcsuite.cli.run for the commands, the scripts'
    `sys.exit(paths.exit_status(main, NAME))`), rather than an OSError's traceback."""
    try:
        return main(*args)
    except WriteFailed as e:  # not bad input (exit 2): the disk's answer
        print(f"{prog}: {e.strerror}", file=sys.stderr)
        return 1


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replaces `path` with `data` at once: a reader (or a kill, a full disk) sees the old file or
    the new one, never a part. Every generated file (results, tables, pages, figures) is written
    through here."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are shared files
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise WriteFailed(e.errno, f"could not write {path} ({e.strerror or e}); "
                              + ("the file before is kept" if path.exists() else "nothing written")) from e
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """write_bytes_atomic of `text` as UTF-8 (not the locale's encoding: the same bytes on every host)."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_csv_atomic(path: Path, df) -> None:
    """A DataFrame as the suite writes its CSVs (no index, 6 significant digits), through
    write_text_atomic: DataFrame.to_csv(path) writes into the file itself, and a failure part-way
    (a full disk, a kill) left a truncated CSV that the next reader took for the whole."""
    write_text_atomic(path, df.to_csv(index=False, float_format="%.6g"))
