"""The build's variant registry (`xcorr list --json`) and GPU context (`xcorr info`)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path


class NoGpu(RuntimeError):
    pass


def binary(build: Path, name: str) -> Path:
    return Path(build) / name


def load_registry(build: Path = None, path: Path = None) -> list[dict]:
    if path is not None:
        return json.loads(Path(path).read_text())
    exe = binary(build, "xcorr")
    if not exe.exists():
        raise FileNotFoundError(f"{exe} not found: build first (meson setup {build} && ninja -C {build})")
    r = subprocess.run([str(exe), "list", "--json"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"{exe} list --json failed ({r.returncode}): {r.stderr.strip()}")
    return json.loads(r.stdout)


def gpu_info(build: Path) -> dict:
    """The GPU context (xcorr_* keys); raises NoGpu with the tool's one-line reason."""
    exe = binary(build, "xcorr")
    if not exe.exists():
        raise FileNotFoundError(f"{exe} not found: build first")
    r = subprocess.run([str(exe), "info"], capture_output=True, text=True, timeout=120)
    if r.returncode == 3:
        raise NoGpu((r.stderr.strip().splitlines() or ["no GPU"])[-1])
    if r.returncode != 0:
        raise RuntimeError(f"{exe} info failed ({r.returncode}): {r.stderr.strip()}")
    return json.loads(r.stdout)


def by_name(registry: list[dict]) -> dict:
    return {v["name"]: v for v in registry}
