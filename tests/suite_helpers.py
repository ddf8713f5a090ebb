"""Helpers of the experiment-suite tests (CPU only): the import path of the xcsuite package and
of experiments/ (the repository root: neither is installed) and a fake build directory whose
xcorr / xcorr_bench are tests/fake_xcorr.py."""
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from build_registry import registry as _tests_registry  # noqa: E402


def suite_registry() -> list:
    """The registry of the CPU suite tests: the build's `xcorr list --json` with the fixture's
    entries for variants the build left out (tests/build_registry.py), the same list the fake
    binaries answer `xcorr list --json` with."""
    return _tests_registry()


FAKE_ENV = ("FAKE_NO_GPU", "FAKE_LOG", "FAKE_CRASH_ON", "FAKE_REJECT", "FAKE_ERROR_ON", "FAKE_ERROR_MESSAGE", "FAKE_SLEEP",
            "FAKE_GPU_NAME", "FAKE_REGISTRY", "FAKE_REVISION", "FAKE_HANG_ON", "FAKE_PIDFILE", "XCORR_LOCK_DIR",
            "XCORR_PEERBENCH", "FAKE_PEER_LOG", "FAKE_PEERS_UNAVAILABLE", "FAKE_PEER_TURN_LOG", "FAKE_PEER_SETUP", "XCORR_PEER_TURN",
            "FAKE_GPUS", "FAKE_GPU_NAMES", "FAKE_ONLY_DEVICE", "XCORR_NVIDIA_SMI", "CUDA_VISIBLE_DEVICES",
            "FAKE_ENVIRONMENT")


def make_fake_build(directory: Path) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    fake = Path(__file__).resolve().parent / "fake_xcorr.py"
    # the peers' list as this process computes it (fake_xcorr.PEERS, this code's), for the peerbench
    # role: its every process computed it anew, importing NumPy and the peers' module (~0.3 s of CPU)
    import fake_xcorr

    peers = directory / "peers-for-fake.json"
    peers.write_text(json.dumps(fake_xcorr.PEERS))
    for role in ("xcorr", "xcorr_bench", "peerbench", "nvidia-smi"):  # peerbench: XCORR_PEERBENCH points there when a test wants it
        exe = directory / role
        env = f'FAKE_PEERS_FILE="{peers}" ' if role == "peerbench" else ""
        exe.write_text(f'#!/bin/sh\n{env}exec "{sys.executable}" "{fake}" {role} "$@"\n')
        exe.chmod(0o755)
    return directory


def no_peers_env(build: Path) -> dict:
    """The environment that gives the runner the fake peerbench with every peer unavailable: what a
    machine without PyTorch and CuPy sees, and the fake nvidia-smi (one GPU unless FAKE_GPUS says
    otherwise). A test of the runner or the reports must not reach the real peers or the real
    GPUs where they are installed (the GPU machine), or it measures real GPUs and depends on the
    machine it runs on."""
    import fake_xcorr

    return {"XCORR_PEERBENCH": str(Path(build) / "peerbench"), "XCORR_NVIDIA_SMI": str(Path(build) / "nvidia-smi"),
            "FAKE_PEERS_UNAVAILABLE": ",".join(p["name"] for p in fake_xcorr.PEERS)}


def load_script(name: str):
    """scripts/<name> (a Python script, with or without .py) as a fresh module, for its functions."""
    import importlib.machinery
    import importlib.util
    path = ROOT / "scripts" / name
    module_name = path.name.removesuffix(".py").replace("-", "_")
    loader = importlib.machinery.SourceFileLoader(module_name, str(path))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(module_name, loader))
    loader.exec_module(module)
    return module


def fake_bench_env(tmp_path: Path, monkeypatch) -> Path:
    """The runner's fake world in tmp_path: no FAKE_* setting left from the caller, the fake build
    (returned), no peers, the bench's log in tmp_path/bench.log and the GPU locks in tmp_path/locks
    (not the machine's: tests run side by side)."""
    clear_fake_env(monkeypatch)
    build = make_fake_build(tmp_path / "build")
    for k, v in no_peers_env(build).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "bench.log"))
    monkeypatch.setenv("XCORR_LOCK_DIR", str(tmp_path / "locks"))
    return build


def clear_fake_env(monkeypatch):
    for k in FAKE_ENV:
        monkeypatch.delenv(k, raising=False)


def log_lines(path: Path) -> list:
    import json

    if not Path(path).exists():
        return []
    return [json.loads(l) for l in Path(path).read_text().splitlines() if l.strip()]


def env_set(**kw):
    for k, v in kw.items():
        os.environ[k] = v


def quick_suite_env(tmp_path: Path, monkeypatch):
    """The experiment runner on the fake bench and the fake peers (their logs in tmp_path), quick
    protocol, every size: returns (run(*args) -> exit status, the results folder, the bench's log,
    tmp_path)."""
    from xcsuite.cli import run_experiments as rx

    clear_fake_env(monkeypatch)
    build = make_fake_build(tmp_path / "build")
    log = tmp_path / "bench.log"
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.setenv("FAKE_PEER_LOG", str(tmp_path / "peer.log"))
    monkeypatch.setenv("XCORR_PEERBENCH", str(build / "peerbench"))  # the peers, faked like the bench
    monkeypatch.setenv("XCORR_LOCK_DIR", str(tmp_path / "locks"))
    results = tmp_path / "results"

    def run(*args):
        return rx.main([*args, "--build", str(build), "--results", str(results), "--no-progress", "--quick",
                        "--max-fmas", "1e20"])

    return run, results / "fake-gpu-9000-quick", log, tmp_path
