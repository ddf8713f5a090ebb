"""fft-large's block FFT on the CPU (tests/block_fft_host.cpp): the device code of
algorithms/common/block_fft.cuh compiled for the host, a std::thread per thread of the block,
__syncthreads a barrier, the shared buffer poisoned with NaN; forward and inverse against a
double-precision DFT at the 2-D template matching lengths and at lengths with 5 and 7; and the
schedule of every 7-smooth length up to 8192 (which lengths fft-large serves). Runs everywhere
(no GPU)."""
import math
import re

import pytest

from conftest import BUILD, run

HOST = BUILD / "block_fft_host"


def host():
    if not HOST.exists():
        pytest.skip(f"{HOST} not built")
    return str(HOST)


def test_block_fft_on_the_cpu_equals_the_dft():
    r = run([host()])
    assert r.returncode == 0, r.stdout + r.stderr
    passed = re.findall(r"^PASS  n = +(\d+)  (forward|inverse)", r.stdout, re.M)
    assert sorted(set(passed)) == sorted((str(n), d) for n in (1, 2, 60, 210, 343, 2160, 4320)
                                         for d in ("forward", "inverse")), r.stdout
    assert "14 passed, 0 failed" in r.stdout


def test_a_wrong_length_fails_the_host_check():
    """The check can fail: a length that is not 7-smooth has no schedule (the host says so and
    exits non-zero rather than computing something)."""
    r = run([host(), "11"])
    assert r.returncode == 1 and "FAIL  n =    11  block_fft: length 11 is not 7-smooth" in r.stdout, r.stdout


def schedules():
    r = run([host(), "--schedules"])
    assert r.returncode == 0, r.stderr
    out = {}
    for line in r.stdout.splitlines():
        n, *rest = line.split()
        out[int(n)] = None if rest == ["none"] else ([int(x) for x in rest[:-2]], int(rest[-1]))
    return out


def test_every_schedule_multiplies_to_its_length_within_the_thread_limit():
    s = schedules()
    smooth = [n for n in range(1, 8193) if all(p in (2, 3, 5, 7) for p in prime_factors(n))]
    assert sorted(s) == smooth
    for n, sched in s.items():
        if sched is None:
            continue
        radices, threads = sched
        assert math.prod(radices) == n, (n, radices)
        assert all(r <= 18 for r in radices), (n, radices)
        most = max([n // r for r in radices] or [1])
        assert threads == -(-most // 32) * 32 and threads <= 512, (n, radices, threads)
        assert len(radices) <= 8


def test_the_template_matching_lengths_have_three_stage_schedules():
    s = schedules()
    for n in (2160, 4096, 4320):
        assert s[n] is not None and len(s[n][0]) == 3, (n, s[n])
    assert s[8192] is None  # 2^13 needs a radix of 32 within 512 threads


def test_every_need_up_to_the_longest_schedule_has_a_length_close_above_it():
    """fft-large takes the smallest scheduled length >= its need (scheduled_length): up to 5832 =
    18^3, the longest, at most 13% above the need (the area of a 2-D transform at most 27%); beyond
    it, none (fft-large refuses the problem and names fft)."""
    served = sorted(n for n, v in schedules().items() if v is not None)
    assert served[-1] == 5832
    worst = max(min(n for n in served if n >= need) / need for need in range(1, 5833))
    assert worst < 1.13, worst


def prime_factors(n):
    f, p = [], 2
    while n > 1 and p * p <= n:
        while n % p == 0:
            f.append(p)
            n //= p
        p += 1
    if n > 1:
        f.append(n)
    return f
