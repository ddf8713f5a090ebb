"""fft-fused's team DFT on the CPU (tests/team_dft_host.cpp): the device code of
algorithms/common/team_dft.cuh compiled for the host, a std::thread per lane, __syncwarp a barrier,
exchange slots poisoned with NaN; every size fft-fused instantiates, forward and inverse, through a
unit-stride and a strided slot, against a double-precision DFT, with `post` checked to see every
element index exactly once. Runs everywhere (no GPU)."""
import re

from conftest import ROOT, run_host_test


def sizes():
    """The transform sizes fft-fused instantiates (its `Sizes`) and those with a TeamPlan."""
    fused = (ROOT / "algorithms" / "51_fft_fused.cu").read_text()
    inst = [int(n) for n in re.search(r"using Sizes = Values<([\d, ]+)>", fused).group(1).split(",")]
    plans = [int(n) for n in re.findall(r"template <> struct TeamPlan<(\d+)>",
                                        (ROOT / "algorithms" / "common" / "team_dft.cuh").read_text())]
    return inst, plans


def test_every_instantiated_size_has_a_team_plan():
    inst, plans = sizes()
    assert inst and sorted(inst) == sorted(plans), (inst, plans)


def test_team_dft_on_the_cpu_equals_the_dft_for_every_size():
    r = run_host_test("team_dft_host")
    passed = re.findall(r"^PASS  N = +(\d+) .*(forward|inverse)  slot stride (\d+)", r.stdout, re.M)
    inst, _ = sizes()
    # each size, both directions, both slot strides
    assert sorted(set(passed)) == sorted((str(n), d, s) for n in inst for d in ("forward", "inverse")
                                         for s in ("1", "9")), r.stdout
    assert "0 failed" in r.stdout
