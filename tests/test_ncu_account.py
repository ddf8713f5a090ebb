"""scripts/ncu_account.py on the committed ncu probe of the FFT cases (issue #25)."""
import subprocess
import sys

import pandas as pd
import pytest

from suite_helpers import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import ncu_account  # noqa: E402

PROBE = ROOT / "results" / "nvidia-h200" / "probes" / "ncu-fft-6a5b521"


def test_one_call_is_the_last_repeated_launch_sequence():
    d = pd.DataFrame({"Kernel Name": ["setup", "a", "b", "c", "a", "b", "c"], "x": range(7)})
    assert list(ncu_account.one_call(d)["x"]) == [4, 5, 6]
    with pytest.raises(ValueError, match="no repeated launch sequence"):
        ncu_account.one_call(pd.DataFrame({"Kernel Name": ["a", "b", "c"], "x": range(3)}))


def test_account_of_the_committed_probe():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "ncu_account.py"), str(PROBE),
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
    probe = ROOT / "results" / "nvidia-h200" / "probes" / "strip-prepass-a38869d"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "ncu_account.py"), str(probe),
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
