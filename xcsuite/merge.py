"""Merging results files: the shards of a Slurm sweep (python -m xcsuite slurm-sweep), or results measured
on other machines, into results/<gpu>/<experiment>.json (python -m xcsuite run-experiments --merge).

A source is a results root (holding <gpu>/ folders) or one <gpu>/ folder; each of its
<experiment>.json files merges into the file of the same name under the target root's folder of
the same name. Per case: a case the target lacks is added; an identical one changes nothing (so
merging twice is merging once); a measurement ("ok") replaces a failure; a failure never replaces
a measurement; two different measurements of one case are a conflict, which by default refuses
the whole merge before anything is written (--on-conflict keep: keep the target's; replace: take
the source's). Files of another GPU or protocol are refused. Every file is written atomically."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from xcsuite import resultfile
from xcsuite.results import load_results

DONE = ("ok", "failed", "rejected")


class MergeError(RuntimeError):
    pass


@dataclass
class FileMerge:
    target: Path
    data: dict
    changed: bool = False
    added: int = 0
    replaced: int = 0
    conflicts: list = field(default_factory=list)


def source_folders(d: Path) -> list[Path]:
    """The <gpu>/ folders of a source: itself where it holds results files, else its subfolders."""
    d = Path(d)
    if not d.is_dir():
        raise MergeError(f"{d}: not a folder")
    if any(not f.name.startswith(".") for f in d.glob("*.json")):
        return [d]
    return [s for s in sorted(d.iterdir())
            if s.is_dir() and not s.name.startswith((".", "_")) and any(s.glob("*.json"))]


def _same(a, b) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _same_measurement(a: dict, b: dict) -> bool:
    """Two records of the same entries, stored by different versions of the format's writer (one
    with FLOPS stored, one with it derived)."""
    try:
        return _same(resultfile.reencode(a), resultfile.reencode(b))
    except (resultfile.FormatError, KeyError, TypeError, ValueError):
        return False


def _protocol(meta: dict) -> tuple:
    p = meta.get("protocol") or {}
    return p.get("repetitions"), p.get("min_time_s"), bool(p.get("quick"))


def merge_into(fm: FileMerge, src: dict, src_path: Path, on_conflict: str) -> None:
    """Merges the results `src` (read from src_path) into fm.data, in memory."""
    tgt = fm.data
    tname, sname = tgt.get("context", {}).get("xcorr_gpu_name"), src.get("context", {}).get("xcorr_gpu_name")
    if tname and sname and tname != sname:
        raise MergeError(f"{src_path} holds results of {sname}, {fm.target} of {tname}")
    tmeta, smeta = tgt.setdefault("xcorr_meta", {}), src.get("xcorr_meta", {})
    if tmeta.get("protocol") and smeta.get("protocol") and _protocol(tmeta) != _protocol(smeta):
        raise MergeError(f"{src_path} was measured under protocol {smeta['protocol']}, {fm.target} under "
                         f"{tmeta['protocol']}")
    before = json.dumps(tgt, sort_keys=True)
    if not tgt.get("context") and src.get("context"):
        tgt["context"] = src["context"]
    for k, v in smeta.items():
        if k not in tmeta and k not in ("shard", "complete", "finished", "updated"):
            tmeta[k] = v
    runs = tmeta.setdefault("runs", [])
    runs.extend(r for r in smeta.get("runs", []) if not any(_same(r, x) for x in runs))
    revs = tmeta.setdefault("git_revisions", [])
    revs.extend(r for r in smeta.get("git_revisions", []) if r not in revs)
    if smeta.get("started") and (not tmeta.get("started") or smeta["started"] < tmeta["started"]):
        tmeta["started"] = smeta["started"]
    if not tgt.get("members") and src.get("members"):
        tgt["members"] = src["members"]
    cases = tgt.setdefault("cases", {})
    for key, rec in src.get("cases", {}).items():
        old = cases.get(key)
        if old is None:
            cases[key] = rec
            fm.added += 1
        elif _same(old, rec) or _same_measurement(old, rec):
            continue
        elif old.get("status") != "ok" and rec.get("status") == "ok":
            cases[key] = rec
            fm.replaced += 1
        elif old.get("status") == "ok" and rec.get("status") != "ok":
            continue
        elif old.get("status") != "ok":  # two failures: the later one says more
            if str(rec.get("time", "")) > str(old.get("time", "")):
                cases[key] = rec
                fm.replaced += 1
        elif on_conflict == "replace":
            cases[key] = rec
            fm.replaced += 1
        elif on_conflict == "error":
            fm.conflicts.append(f"{key}: measured in {fm.target} at {old.get('time')} (revision "
                                f"{old.get('revision')}) and in {src_path} at {rec.get('time')} (revision "
                                f"{rec.get('revision')})")
    merged_from = tmeta.setdefault("merged_from", [])
    if str(src_path) not in merged_from:
        merged_from.append(str(src_path))
    if json.dumps(tgt, sort_keys=True) != before:
        fm.changed = True


def finish(fm: FileMerge) -> None:
    """The merged file's cases in measurement order and its completeness, from what it holds."""
    data, meta = fm.data, fm.data["xcorr_meta"]
    data["cases"] = dict(sorted(data["cases"].items(), key=lambda kv: str(kv[1].get("time", ""))))
    planned = meta.get("cases_planned")
    keys = {k for m in data.get("members", []) for k in m.get("keys", [])}
    done = [c for k, c in data["cases"].items() if k in keys and c.get("status") in DONE]
    meta["complete"] = bool(planned) and len(done) >= planned
    meta["finished"] = max(str(c.get("time", "")) for c in done) if meta["complete"] else None


def plan_merge(sources: list, results_root: Path, on_conflict: str = "error") -> list[FileMerge]:
    """Every target file's merged contents, in memory; raises MergeError on a refused source."""
    merges: dict[Path, FileMerge] = {}
    root = Path(results_root).resolve()
    for s in sources:
        for folder in source_folders(s):
            tdir = root / folder.name
            if folder.resolve() == tdir:
                raise MergeError(f"{folder} is the target folder itself")
            for f in sorted(folder.glob("*.json")):
                if f.name.startswith("."):
                    continue
                t = tdir / f.name
                if t not in merges:
                    merges[t] = FileMerge(t, load_results(t) if t.exists() else resultfile.new_file())
                merge_into(merges[t], load_results(f), f, on_conflict)
    for fm in merges.values():
        before = json.dumps(fm.data, sort_keys=True)
        finish(fm)
        if fm.changed or json.dumps(fm.data, sort_keys=True) != before or not fm.target.exists():
            fm.changed = True
    return list(merges.values())


def write(fm: FileMerge) -> None:
    resultfile.write_atomic(fm.target, fm.data)
