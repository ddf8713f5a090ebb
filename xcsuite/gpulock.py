"""One measuring process per GPU: an exclusive fcntl.flock on a lock file named after the GPU.

flock rather than a pid file: the kernel drops the lock when the last descriptor of it closes,
so a runner that died (even by SIGKILL) leaves no stale lock to clean up, and there is no
pid-reuse race. The runner hands the descriptor to each xcorr_bench it starts, so a benchmark
orphaned by a killed runner keeps the GPU locked until it ends as well.

The lock files live in $XCORR_LOCK_DIR (default: <tmp>/xcorr-gpu-locks), shared by every
checkout and results folder on the machine."""
from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import re
import socket
import tempfile
from pathlib import Path


class GpuBusy(RuntimeError):
    pass


def lock_dir() -> Path:
    return Path(os.environ.get("XCORR_LOCK_DIR") or Path(tempfile.gettempdir()) / "xcorr-gpu-locks")


def gpu_key(ctx: dict, smi_gpus: list[dict], env=os.environ) -> str:
    """What names the GPU a benchmark will use (CUDA's device 0 of CUDA_VISIBLE_DEVICES).

    `xcorr info` reports no UUID, so: a UUID in CUDA_VISIBLE_DEVICES; else nvidia-smi's UUID of
    that device when its numbering is CUDA's (one GPU, identical GPUs, or CUDA_DEVICE_ORDER=
    PCI_BUS_ID); else the device name with CUDA_VISIBLE_DEVICES (coarser on a mixed machine with
    CUDA's default order, but never two keys for one GPU within one setting)."""
    for k in ("xcorr_gpu_uuid", "xcorr_pci_bus_id"):
        if ctx.get(k):
            return str(ctx[k])
    visible = env.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if visible.startswith(("GPU-", "MIG-")):
        return visible
    index = int(visible) if visible.isdigit() else 0 if not visible else None
    same_order = len(smi_gpus) == 1 or len({g.get("name") for g in smi_gpus}) == 1 \
        or env.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID"
    if index is not None and same_order and index < len(smi_gpus) and smi_gpus[index].get("uuid"):
        return smi_gpus[index]["uuid"]
    return f"{ctx.get('xcorr_gpu_name', 'unknown')} cuda-visible={visible or 'all'}"


class GpuLock:
    def __init__(self, key: str, name: str = ""):
        self.key = key
        self.label = f"{name} ({key})" if name and name not in key else key  # for messages
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", key).strip("_") or "gpu"
        self.path = lock_dir() / f"{name}.lock"
        self.fd = None

    def acquire(self) -> None:
        d = self.path.parent
        d.mkdir(parents=True, exist_ok=True)
        try:
            d.chmod(0o1777)  # shared by every user of the machine, like /tmp
        except OSError:
            pass
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace")
            os.close(fd)
            raise GpuBusy(self.describe(holder)) from None
        os.ftruncate(fd, 0)
        me = {"pid": os.getpid(), "host": socket.gethostname(),
              "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "gpu": self.key}
        os.pwrite(fd, (json.dumps(me) + "\n").encode(), 0)
        self.fd = fd

    def describe(self, holder_text: str) -> str:
        try:
            h = json.loads(holder_text)
            pid, started = int(h["pid"]), h.get("started", "?")
        except (ValueError, KeyError, TypeError):
            return f"GPU {self.label} is in use by another runner (lock {self.path})"
        try:
            os.kill(pid, 0)
            alive = True
        except ProcessLookupError:
            alive = False
        except PermissionError:
            alive = True
        who = (f"runner pid {pid}, started {started}" if alive else
               f"an xcorr_bench left running by runner pid {pid} (started {started}, now gone)")
        return f"GPU {self.label} is in use by {who} (lock {self.path})"

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class FolderLock(GpuLock):
    """One writer per results folder (a runner, several GPUs' runner, or a merge): each rewrites
    whole files from what it holds in memory, so two at once would lose each other's cases."""

    def __init__(self, folder):
        import hashlib

        folder = Path(folder).resolve()
        super().__init__("results-" + hashlib.sha1(str(folder).encode()).hexdigest()[:16] + "-" + folder.name)
        self.label = str(folder)

    def describe(self, holder_text: str) -> str:
        return super().describe(holder_text).replace(f"GPU {self.label}", f"results folder {self.label}", 1)
