"""The build's variant registry (`xcorr list --json`) and GPU context (`xcorr info`)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path


# A variant's family (`.family` of XCORR_REGISTER_VARIANT, `xcorr list --json`), with what it is:
# docs/contributing.md ("Families") says what each decides (figure groups, the headline table's
# columns, the cost model's rates, the claims page). Another value is allowed: a paper kernel.
FAMILIES = {
    "baseline": "the paper's naive baseline (overlap-wise)",
    "warp-shuffle": "the paper's warp-shuffle kernels (warp-shuffle, split-row, grouped-overlap)",
    "warp-per-overlap": "the paper's warp/block-per-overlap kernels",
    "multi-matrix": "the paper's multi-matrix kernels (10-15)",
    "hopper": "this project's new kernels (20-30, fft-fused)",
    "fft": "cuFFT-based correlation (fft, fft+plan, fft-segmented)",
    "peer": "another library, measured by xcsuite.peerbench",
}


class NoGpu(RuntimeError):
    pass


def binary(build: Path, name: str) -> Path:
    return Path(build) / name


def load_registry(build: Path = None, path: Path = None) -> list[dict]:
    """The variants of `build` (`xcorr list --json`), or those of a file: such a list, or a results
    file (the registry its run recorded, xcorr_meta.registry). A ValueError says what is wrong."""
    if path is not None:
        try:
            data = json.loads(Path(path).read_text())
        except OSError as e:
            raise ValueError(f"--registry {path}: {e.strerror or e}") from None
        except ValueError as e:
            raise ValueError(f"--registry {path}: not JSON ({e})") from None
        if isinstance(data, dict) and isinstance(data.get("xcorr_meta"), dict):
            data = data["xcorr_meta"].get("registry")
        if not (isinstance(data, list) and data and all(isinstance(v, dict) and isinstance(v.get("name"), str)
                                                         for v in data)):
            raise ValueError(f"--registry {path}: neither a registry (`xcorr list --json`) nor a results file "
                             "that records one")
        return data
    exe = binary(build, "xcorr")
    if not exe.exists():
        raise FileNotFoundError(f"{exe} not found: build first (meson setup {build} && ninja -C {build})")
    r = subprocess.run([str(exe), "list", "--json"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"{exe} list --json failed ({r.returncode}): {r.stderr.strip()}")
    return json.loads(r.stdout)


def gpu_info(build: Path, env: dict | None = None) -> dict:
    """The GPU context (xcorr_* keys) of the GPU `env` (default: this process's environment) makes
    CUDA's device 0; raises NoGpu with the tool's one-line reason."""
    exe = binary(build, "xcorr")
    if not exe.exists():
        raise FileNotFoundError(f"{exe} not found: build first")
    r = subprocess.run([str(exe), "info"], capture_output=True, text=True, timeout=120, env=env)
    if r.returncode == 3:
        raise NoGpu((r.stderr.strip().splitlines() or ["no GPU"])[-1])
    if r.returncode != 0:
        raise RuntimeError(f"{exe} info failed ({r.returncode}): {r.stderr.strip()}")
    return json.loads(r.stdout)


def by_name(registry: list[dict]) -> dict:
    return {v["name"]: v for v in registry}


# --- the peers (xcsuite/peers.py, run by xcsuite/peerbench.py): PyTorch and CuPy, measured by a
# Python program with xcorr_bench's interface -----------------------------------------------------

PEER_FAMILY = "peer"


def peer_command() -> list[str]:
    """The peers' benchmark command: `python -m xcsuite.peerbench`, run from the repository root
    (XCORR_PEERBENCH replaces it, e.g. with a fake in the tests)."""
    import os
    import shlex
    import sys

    env = os.environ.get("XCORR_PEERBENCH")
    return shlex.split(env) if env else [sys.executable, "-m", "xcsuite.peerbench"]


def load_peer_registry() -> list[dict]:
    """The peers that can run here (`peerbench list --json`, available ones only): a peer whose
    packages are missing stays out, so experiments leave its series out with a reason instead of
    failing every case."""
    from xcsuite import paths

    r = subprocess.run([*peer_command(), "list", "--json"], capture_output=True, text=True, timeout=120,
                       cwd=paths.ROOT)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(peer_command())} list --json failed ({r.returncode}): {r.stderr.strip()}")
    return [v for v in json.loads(r.stdout) if v.get("available", True)]


def with_peers(registry: list[dict]) -> list[dict]:
    """The build's registry and the available peers, one list (names are distinct)."""
    names = {v["name"] for v in registry}
    return registry + [v for v in load_peer_registry() if v["name"] not in names]


def is_peer(entry: dict | None) -> bool:
    return bool(entry) and entry.get("family") == PEER_FAMILY
