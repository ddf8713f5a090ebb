"""The peaks' candidate key on the CPU (tests/peak_key_host.cpp, lib/reduce/peak.cuh's peak_key and
peak_of_key): its unsigned order is the contract's order of peaks (the larger value, of equal
values the smaller index; -0 equal to +0) over every pair of 98 candidates, infinities, zeros,
subnormals and near-ties among them; each key is above 0 and decodes to its candidate. The
atomicMax merges of fft-fused's k = 1 peaks and of its zncc store's tile maxima rest on it. Runs
everywhere (no GPU)."""
import re

from conftest import run_host_test


def test_the_key_orders_candidates_as_the_contract_does():
    r = run_host_test("peak_key_host")
    m = re.search(r"^(\d+) cases, 0 failed$", r.stdout, re.M)
    assert m and int(m.group(1)) == 2 * 98 * 98 + 2 * 98 + 1, r.stdout
