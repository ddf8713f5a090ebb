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
