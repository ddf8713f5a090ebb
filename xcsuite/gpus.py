"""The GPUs of this host that a run may use, and the cost-balanced dealing of cases among GPUs
(python -m xcsuite run-experiments --gpus) or among the tasks of a Slurm job array (--shard K/N).

Discovery is nvidia-smi's (`--query-gpu=index,name,uuid,pci.bus_id`; $XCORR_NVIDIA_SMI replaces
the command, e.g. with the tests' fake), restricted to CUDA_VISIBLE_DEVICES where that is set. The
record of the GPUs that a result keeps (driver, clocks, temperature, power) is nvidia-smi's too,
read here for every script and experiment alike (nvidia_smi).
Each device is then handed to its benchmarks by UUID (CUDA_VISIBLE_DEVICES=GPU-...), which means
the same GPU whatever CUDA_DEVICE_ORDER is: nvidia-smi numbers GPUs by PCI bus, CUDA by default
fastest first, and the two differ on a host with GPUs of different models."""
from __future__ import annotations

import datetime as dt
import heapq
import os
import shlex
import subprocess
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Device:
    index: str  # nvidia-smi's index (PCI bus order)
    name: str  # nvidia-smi's name (the results folder is named after the benchmark's own name)
    uuid: str

    def record(self) -> dict:
        """What a result records of the device that measured it."""
        return {"index": self.index, "uuid": self.uuid}

    def label(self) -> str:
        return f"GPU {self.index} ({self.name}, {self.uuid})"


class GpuSelectionError(ValueError):
    pass


def smi_command() -> list[str]:
    return shlex.split(os.environ.get("XCORR_NVIDIA_SMI") or "nvidia-smi")


# What a result records of its GPUs (nvidia_smi's default fields).
SMI_FIELDS = ("index", "name", "uuid", "pci.bus_id", "driver_version", "clocks.sm", "clocks.max.sm", "clocks.mem",
              "clocks.max.mem", "clocks.applications.graphics", "temperature.gpu", "power.draw", "power.limit",
              "pstate", "persistence_mode", "compute_mode")


def nvidia_smi(fields=SMI_FIELDS, uuids=None) -> dict:
    """nvidia-smi's `fields` of each GPU, as it prints them (units included: "1980 MHz"):
    {"time": the UTC time, "gpus": [{field: value}, ...]} in nvidia-smi's order; only the GPUs whose
    UUID is in `uuids` where that is given (`fields` then holds "uuid"). {"error": why} where
    nvidia-smi cannot run or fails: the caller records that instead of failing."""
    fields = list(fields)
    if uuids is not None and "uuid" not in fields:
        raise ValueError("nvidia_smi: selecting GPUs by UUID needs the field uuid")
    time = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    try:
        r = subprocess.run([*smi_command(), f"--query-gpu={','.join(fields)}", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": f"nvidia-smi not run: {e}"}
    if r.returncode != 0:
        return {"error": (r.stderr or r.stdout).strip()[-300:]}
    gpus = [dict(zip(fields, (v.strip() for v in line.split(",")))) for line in r.stdout.strip().splitlines()]
    if uuids is not None:
        wanted = set(uuids)
        gpus = [g for g in gpus if g.get("uuid") in wanted]
    return {"time": time, "gpus": gpus}


def list_devices() -> list[Device] | None:
    """Every GPU nvidia-smi lists, or None where it cannot say (no nvidia-smi, no driver)."""
    try:
        r = subprocess.run([*smi_command(), "--query-gpu=index,name,uuid,pci.bus_id", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    out = []
    for line in r.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[2].startswith(("GPU-", "MIG-")):
            out.append(Device(parts[0], parts[1], parts[2]))
    return out or None


def _entries(spec: str) -> list[str]:
    """The non-empty entries of a comma list (CUDA_VISIBLE_DEVICES, --gpus)."""
    return [e for e in (e.strip() for e in spec.split(",")) if e]


def _matching(entry: str, devices: list[Device]) -> list[Device]:
    """The devices an entry names: an nvidia-smi index, or a (prefix of a) GPU-/MIG- UUID."""
    return [d for d in devices if d.index == entry or (entry.startswith(("GPU-", "MIG-")) and d.uuid.startswith(entry))]


def visible(devices: list[Device], env=os.environ) -> list[Device] | None:
    """The devices CUDA_VISIBLE_DEVICES leaves visible, in its order (all where it is unset);
    None where its entries do not all name a listed device (then only CUDA knows what they mean)."""
    spec = env.get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        return list(devices)
    out = []
    for entry in _entries(spec):
        match = _matching(entry, devices)
        if len(match) != 1:
            return None
        out.append(match[0])
    return out


def select(spec: str, devices: list[Device]) -> list[Device]:
    """--gpus: "all", or a comma list of nvidia-smi indices or UUIDs, among `devices` (the
    visible ones)."""
    if spec.strip() == "all":
        return list(devices)
    out = []
    for entry in _entries(spec):
        match = _matching(entry, devices)
        if len(match) != 1:
            raise GpuSelectionError(f"--gpus: no visible GPU {entry!r} (visible: "
                                    f"{', '.join(d.index + ' ' + d.uuid for d in devices) or 'none'})")
        if match[0] not in out:
            out.append(match[0])
    if not out:
        raise GpuSelectionError("--gpus: no GPU selected")
    return out


# ---- dealing cases out by estimated cost ----------------------------------------------------

def units(items: list, cost, group, n: int, whole=lambda key: False) -> list[list]:
    """The items in units dealt whole: those with one `group` key together (the cases of one
    figure point, so that the variants compared at a shape are measured on one GPU), unless a
    group costs more than a 1/n share of the whole, which is split into single items (a group
    whose key `whole` accepts never is: work that cannot run on two GPUs at once anyway)."""
    total = sum(cost(x) for x in items)
    groups: dict = {}
    for x in items:
        groups.setdefault(group(x), []).append(x)
    out = []
    for key, g in groups.items():
        if len(g) > 1 and n > 1 and not whole(key) and sum(cost(x) for x in g) > total / n:
            out.extend([x] for x in g)
        else:
            out.append(g)
    return out


def deal(items: list, n: int, cost, group=lambda x: id(x), whole=lambda key: False) -> list[list]:
    """Deals `items` into n bins of about equal estimated cost: the units (see `units`) by
    decreasing cost, each to the least loaded bin (the LPT rule: the largest bin is at most 4/3 of
    the best possible, and at most the mean plus one unit). Deterministic: ties go to the unit
    seen first and the lowest bin. Within a bin, items keep their order in `items`."""
    order = {id(x): i for i, x in enumerate(items)}
    heap = [(0.0, b) for b in range(n)]
    bins: list[list] = [[] for _ in range(n)]
    for u, c in ordered_units(items, n, cost, group, whole):
        load, b = heapq.heappop(heap)
        bins[b].extend(u)
        heapq.heappush(heap, (load + c, b))
    return [sorted(b, key=lambda x: order[id(x)]) for b in bins]


def ordered_units(items: list, n: int, cost, group, whole=lambda key: False) -> list[tuple[list, float]]:
    """The units of `items` for n bins (see `units`) with their costs, by decreasing cost, ties to
    the unit seen first: the order in which deal and Pool hand them out."""
    if n < 1:
        raise ValueError("n must be >= 1")
    order = {id(x): i for i, x in enumerate(items)}
    us = [(u, sum(cost(x) for x in u)) for u in units(items, cost, group, n, whole)]
    us.sort(key=lambda uc: (-uc[1], order[id(uc[0][0])]))
    return us


class Pool:
    """The units of `items` (see `units`) in `deal`'s order, decreasing estimated cost, taken by n
    workers as they run short of work (guided self-scheduling): a take is the next unit and then
    as many of the following as keep it within the cost left divided by 2n (within `least` and
    `most`), so the takes are large while much is left and small at the end. A worker slower than
    its estimates, or one waiting for a resource the others hold, then leaves the rest idle for at
    most about one small take at the end, where a deal fixed in advance leaves whatever the
    estimates missed. `bucket` (of an item): a take holds only units of its first unit's bucket
    (an experiment's: each experiment's cases are a benchmark process of their own, so a take of
    several would start one per experiment), the others left in place for later takes; `least`
    keeps the last takes from being so small that starting their processes costs more than the
    balance gains; `whole` (of a unit's group key): groups never split into single items (see
    `units`). Thread-safe; deterministic for one sequence of takes."""

    def __init__(self, items: list, n: int, cost, group=lambda x: id(x), most: float = float("inf"),
                 least: float = 0.0, bucket=lambda x: None, whole=lambda key: False):
        self._units = list(ordered_units(items, n, cost, group, whole))
        self._left = sum(c for _, c in self._units)
        self._n, self._most, self._least, self._bucket = n, most, min(least, most), bucket
        self._lock = threading.Lock()

    def take(self) -> list:
        """The next items ([] when none is left), each unit's in the order given."""
        with self._lock:
            if not self._units:
                return []
            want = min(self._most, max(self._least, self._left / (2 * self._n)))
            key = self._bucket(self._units[0][0][0])
            out, got, rest = [], 0.0, []
            for i, (u, c) in enumerate(self._units):
                if self._bucket(u[0]) != key:
                    rest.append((u, c))
                    continue
                if out and got + c > want and got >= self._least:  # the first that does not fit ends it
                    rest.extend(self._units[i:])
                    break
                out.extend(u)
                got += c
            self._units = rest
            self._left -= got
            return out

    def left(self) -> float:
        with self._lock:
            return self._left


def parse_shard(text: str) -> tuple[int, int]:
    """--shard K/N (0 <= K < N)."""
    try:
        k, n = (int(v) for v in text.split("/"))
    except ValueError:
        raise GpuSelectionError(f"--shard {text!r}: expected K/N, e.g. 0/4") from None
    if not (n >= 1 and 0 <= k < n):
        raise GpuSelectionError(f"--shard {text!r}: need 0 <= K < N")
    return k, n
