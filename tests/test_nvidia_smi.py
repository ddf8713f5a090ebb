"""The one reader of nvidia-smi's record of the GPUs (xcsuite/gpus.py, nvidia_smi), which every
result that names its GPUs' driver and clocks keeps (run-experiments, tm-scaling, batch-scaling,
sweep-scaling, zncc-offsets, peerbench): the fields asked of the command $XCORR_NVIDIA_SMI names,
each GPU's values, the GPUs chosen by UUID, and a failure recorded rather than raised. CPU only:
a fake nvidia-smi."""
import os

import pytest

from xcsuite import gpus, peerbench, tables

FIELDS = ("index", "name", "uuid", "driver_version", "clocks.max.sm")


def fake_smi(tmp_path, monkeypatch, script):
    path = tmp_path / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    monkeypatch.setenv("XCORR_NVIDIA_SMI", str(path))
    return path


def two_h200s(tmp_path, monkeypatch):
    return fake_smi(tmp_path, monkeypatch, f'echo "$@" > {tmp_path}/args\n'
                    "printf '0, NVIDIA H200, GPU-aa, 580.159.04, 1980 MHz\\n"
                    "1, NVIDIA H200, GPU-bb, 580.159.04, [N/A]\\n'\n")


def test_each_gpu_is_a_record_of_the_fields_asked(tmp_path, monkeypatch):
    two_h200s(tmp_path, monkeypatch)
    rec = gpus.nvidia_smi(FIELDS)
    assert (tmp_path / "args").read_text().split() == [f"--query-gpu={','.join(FIELDS)}", "--format=csv,noheader"]
    assert rec["gpus"] == [
        {"index": "0", "name": "NVIDIA H200", "uuid": "GPU-aa", "driver_version": "580.159.04", "clocks.max.sm": "1980 MHz"},
        {"index": "1", "name": "NVIDIA H200", "uuid": "GPU-bb", "driver_version": "580.159.04", "clocks.max.sm": "[N/A]"}]
    assert rec["time"].endswith("+00:00")
    assert tables._driver(rec) == ", driver 580.159.04"  # what the multi-GPU table prints of it


def test_the_gpus_of_a_run_are_chosen_by_uuid(tmp_path, monkeypatch):
    two_h200s(tmp_path, monkeypatch)
    assert [g["index"] for g in gpus.nvidia_smi(FIELDS, uuids=["GPU-bb"])["gpus"]] == ["1"]
    assert gpus.nvidia_smi(FIELDS, uuids=[])["gpus"] == []
    with pytest.raises(ValueError, match="uuid"):
        gpus.nvidia_smi(("index", "name"), uuids=["GPU-aa"])


def test_a_missing_or_failing_nvidia_smi_is_recorded_not_raised(tmp_path, monkeypatch):
    monkeypatch.setenv("XCORR_NVIDIA_SMI", str(tmp_path / "absent"))
    assert gpus.nvidia_smi()["error"].startswith("nvidia-smi not run:")
    fake_smi(tmp_path, monkeypatch, "echo 'NVIDIA-SMI has failed: no driver' >&2\nexit 9\n")
    assert gpus.nvidia_smi() == {"error": "NVIDIA-SMI has failed: no driver"}
    assert tables._driver(gpus.nvidia_smi()) == ""


def test_peerbench_reads_the_largest_clocks_without_their_unit(tmp_path, monkeypatch):
    fake_smi(tmp_path, monkeypatch, "printf '1980 MHz, 3201 MHz\\n0 MHz, 0 MHz\\n'\n")
    assert peerbench._max_clocks_mhz() == (1980, 3201)  # the first GPU's
    fake_smi(tmp_path, monkeypatch, "printf '[N/A], 3201 MHz\\n'\n")
    assert peerbench._max_clocks_mhz() == (0, 3201)
    monkeypatch.setenv("XCORR_NVIDIA_SMI", os.devnull)
    assert peerbench._max_clocks_mhz() == (0, 0)
