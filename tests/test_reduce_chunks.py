"""A reduced plan's chunks on the CPU (tests/reduce_chunks_host.cpp, lib/reduce/reducer.hpp's
chunks_of): every form, counts and budget, peaks and the maximum over the rights; each pair covered
once, by the right matrices, in the answer's order. Runs everywhere (no GPU)."""
import re

from conftest import run_host_test


def test_chunks_cover_every_pair_once_with_the_right_matrices():
    r = run_host_test("reduce_chunks_host")
    m = re.search(r"^(\d+) cases, 0 failed$", r.stdout, re.M)
    assert m and int(m.group(1)) > 300, r.stdout
