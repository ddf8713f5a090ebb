"""The float64 reference's constant rule and its border on the CPU (tests/reference_border_host.cpp,
lib/xcorr/reference_element.hpp's zncc_at and zncc_other_at): 0 where a part's variance is at most
1e-6 of its matrix's; on the border (a standard deviation below 1e-2 of the matrix's) the other
answer the contract allows, which the checks (harness/check.cpp) take where it is nearer to a
variant's output; none off the border or for an exactly constant part. Runs everywhere (no GPU)."""
import re

from conftest import run_host_test


def test_the_constant_rule_and_its_border():
    r = run_host_test("reference_border_host")
    m = re.search(r"^(\d+) cases, 0 failed$", r.stdout, re.M)
    assert m and int(m.group(1)) == 14, r.stdout
