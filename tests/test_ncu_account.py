"""scripts/dev/ncu-fft-report on the committed ncu probe of the FFT cases: the probes' CSVs
kept in tests/fixtures/ (the probes themselves are at revision fbc44b2, notes/probes.md)."""
import subprocess
import sys

import pandas as pd
import pytest

from suite_helpers import ROOT, load_script

ncu_account = load_script("dev/ncu-fft-report")

PROBE = ROOT / "tests" / "fixtures" / "ncu-fft-6a5b521"


def calls(names: str) -> list:
    """one_call's kernels of a launch sequence written as a string, one letter a kernel."""
    return "".join(ncu_account.one_call(pd.DataFrame({"Kernel Name": list(names)}))["Kernel Name"])


def test_one_call_is_the_last_repeated_launch_sequence():
    d = pd.DataFrame({"Kernel Name": ["setup", "a", "b", "c", "a", "b", "c"], "x": range(7)})
    assert list(ncu_account.one_call(d)["x"]) == [4, 5, 6]
    with pytest.raises(ValueError, match="no repeated launch sequence"):
        ncu_account.one_call(pd.DataFrame({"Kernel Name": ["a", "b", "c"], "x": range(3)}))


def test_one_call_of_a_profile_cut_inside_a_call():
    """A call of two equal row passes r r, a column pass c and an output pass o, the profile cut
    after the next call's row passes: the call is four kernels (in a rotated order), not the last
    r. (The shortest period whose last two runs agree took that r alone: fft-fused one-to-one at
    512's profile.)"""
    assert calls("srrcorrcorrcorr") == "corr"
    assert calls("srrcorrcorrcor") == "rcor"
    # a period of two inside the call (r c r c) does not make a call of two either
    assert sorted(calls("xrcrcporcrcporcrcporcrc")) == sorted("rcrcpo")


def test_one_call_keeps_a_finishing_kernel():
    """Calls a b c, the last ones followed by a finishing kernel f (fft's crop, whose time the
    benchmark's `+ finish` counts): the last call is a b c f."""
    assert calls("abcabcabcabcabcfabcf") == "abcf"
    assert calls("abcabcabcabc") == "abc"


def test_top_stalls_are_the_reasons_with_the_most_warps_waiting():
    col = lambda reason: f"{ncu_account.STALL_PREFIX}{reason}{ncu_account.STALL_SUFFIX}"
    r = pd.Series({col("long_scoreboard"): 1.6, col("selected"): 1.0, col("mio_throttle"): 2.5,
                   col("barrier"): 0.2, col("wait"): 0.7, "gpu__time_duration.sum": 9e9})
    assert ncu_account.top_stalls(r) == "mio_throttle 2.5, long_scoreboard 1.6, wait 0.7"
    assert ncu_account.top_stalls(r, 1) == "mio_throttle 2.5"
    assert ncu_account.top_stalls(pd.Series({"gpu__time_duration.sum": 1.0})) == ""


def test_account_with_stalls_of_the_committed_h100_probe():
    """Session 33's probe (H100, scripts/dev/ncu-fft-profile with WarpStateStats): ours and cuFFT's
    kernels side by side, each with its warps an SM, instructions and top stalls, and the call's
    instructions at the best issue rate of its kernels."""
    probe = ROOT / "tests" / "fixtures" / "ncu-stalls-6d198ad"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "dev" / "ncu-fft-report"), str(probe),
                        "--summary", str(ROOT / "results" / "nvidia-h100-80gb-hbm3" / "summary.csv")],
                       capture_output=True, text=True, check=True)
    sections = {s.split(":", 1)[0]: s for s in r.stdout.split("### ")[1:]}
    assert set(sections) == {"ff1x32", "fft1x32", "ff256", "fft256", "ff512", "fft512", "ffnmn", "ff32x32", "fft32x32"}
    ff = sections["ff1x32"]
    assert "5 kernels" in ff and "top stalls (warps per issue)" in ff
    assert "instructions: 27.46 M warp instructions" in ff and "best issue rate of these kernels (50%)" in ff
    assert "| `unnamed>::cols_kernel<512, 1>` |" in ff and "| 15.5 | 14.30 | long_scoreboard" in ff
    assert "4 kernels" in sections["ff512"]  # the two row passes of a call are not a call
    assert "6 kernels" in sections["fft1x32"] and "pad_window_kernel" in sections["fft1x32"]


def test_account_of_the_committed_probe():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "dev" / "ncu-fft-report"), str(PROBE),
                        "--summary", str(ROOT / "results" / "nvidia-h200" / "summary.csv")],
                       capture_output=True, text=True, check=True)
    sections = r.stdout.split("### ")[1:]
    assert len(sections) == 8
    ff = next(s for s in sections if s.startswith("ff32x32"))
    assert "6 kernels" in ff and "1069.6 MB" in ff  # 1024 outputs of 511 x 511 floats
    assert "cols_kernel<512, 2>" in ff


def test_account_of_named_cases_with_windows_and_normalization():
    """Cases named by their four sizes, with a window and a normalization (zncc_frames' probe): each
    finds its summary row (the benchmark line), and the window crop's gather_flat_kernel, timed in
    a cropped raw call, counts among the call's kernels while the check's gather_kernel does not."""
    probe = ROOT / "tests" / "fixtures" / "ncu-strip-prepass-a38869d"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "dev" / "ncu-fft-report"), str(probe),
                        "--summary", str(ROOT / "results" / "nvidia-h200" / "summary.csv")],
                       capture_output=True, text=True, check=True)
    sections = {s.split(":", 1)[0]: s for s in r.stdout.split("### ")[1:]}
    assert set(sections) == {"ffzncc156-44496c4", "ffraw156-44496c4", "ffzncc23-6fc3e0b", "ffzncc53-6fc3e0b",
                             "ffraw53-6fc3e0b"}
    assert all("benchmark:" in s and "output 4.4 MB" in s for s in sections.values())  # 1000 x 33 x 33 floats
    raw = sections["ffraw53-6fc3e0b"]
    assert "3 kernels" in raw and "gather_flat_kernel" in raw
    assert "strip_prepass_kernel" in sections["ffzncc156-44496c4"]
    assert ncu_account.HARNESS.search("xcorr::<unnamed>::gather_kernel(const float *)")
    assert not ncu_account.HARNESS.search("xcorr::<unnamed>::gather_flat_kernel(const float *)")
    spec = {"variant": "fft-fused", "form": "n-to-m", "hL": "256", "wL": "256", "hR": "53", "wR": "54",
            "nL": "1000", "nR": "1", "max_shift": "16", "normalize": "zncc"}
    summ = pd.read_csv(ROOT / "results" / "nvidia-h200" / "summary.csv")
    rows = summ[ncu_account.matches(summ, spec)]
    assert len(rows) == 1 and "normalize=zncc" in rows.iloc[0].params
    assert len(summ[ncu_account.matches(summ, {k: v for k, v in spec.items() if k != "normalize"})]) == 1


def test_floors_are_each_kernels_bytes_or_instructions_at_peak():
    """DRAM floor: duration x DRAM % of peak; issue floor: warp instructions over 4 an SM a cycle;
    bound: the larger of the two per kernel. A CSV without the instruction count gives none."""
    d = pd.DataFrame({"gpu__time_duration.sum": [10_000.0, 4_000.0],  # ns
                      "dram__throughput.avg.pct_of_peak_sustained_elapsed": [50.0, 10.0],
                      "smsp__inst_executed.sum": [1.056e6, 2.112e6],
                      "sm__cycles_elapsed.avg.per_second": [2e9, 2e9],
                      "device__attribute_multiprocessor_count": [132, 132]})
    f = ncu_account.floors(d)
    assert f.dram.tolist() == pytest.approx([5.0, 0.4])
    assert f.issue.tolist() == pytest.approx([1.0, 2.0])  # 1.056e6 / (4 x 132 x 2e9) s
    assert f.bound.tolist() == pytest.approx([5.0, 2.0])
    assert ncu_account.floors(d.drop(columns="smsp__inst_executed.sum")) is None
