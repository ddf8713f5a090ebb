"""fft-large's block FFT on the CPU (tests/block_fft_host.cpp): the device code of
algorithms/common/block_fft.cuh compiled for the host, a std::thread per thread of the block,
__syncthreads a barrier, the shared buffer poisoned with NaN; forward and inverse against a
double-precision DFT at the 2-D template matching lengths and at lengths with 5 and 7, in the
layout the host picks and in every order and layout it picks from; its fused ends (stage 0 read
through a loader, pruned; a correlation's forward and inverse meeting in registers); its
ping-pong stages (several butterflies a thread: the long columns); and the schedule of every
7-smooth length up to 8192 (which lengths fft-large serves, and the shared-memory wavefronts of
its layout), and the long schedules up to 11664. Runs everywhere (no GPU)."""
import functools
import math
import re

import pytest

from conftest import BUILD, run

HOST = BUILD / "block_fft_host"


def host():
    if not HOST.exists():
        pytest.skip(f"{HOST} not built")
    return str(HOST)


@functools.lru_cache(maxsize=None)
def default_run():
    """The host check at its default lengths, run once for the tests that read it."""
    return run([host()])


def test_block_fft_on_the_cpu_equals_the_dft():
    r = default_run()
    assert r.returncode == 0, r.stdout + r.stderr
    passed = re.findall(r"^PASS  n = +(\d+)  (forward|inverse)", r.stdout, re.M)
    assert sorted(set(passed)) == sorted((str(n), d) for n in (1, 2, 60, 210, 343, 2160, 4320)
                                         for d in ("forward", "inverse")), r.stdout
    assert "69 passed, 0 failed" in r.stdout


def test_the_ping_pong_stages_equal_the_dft_with_several_butterflies_a_thread():
    """block_fft_pingpong (fft-large's long columns): 4320 with 96 threads for its 288 butterflies a
    stage, and the long schedules of 6000 and 8640 (four stages, 1000 and 1080 butterflies: the
    columns of test_fft_large's long cases) with a block's 512; forward and inverse against the double DFT, the result in the buffer the stage
    count's parity names (every thread told the same), the pad words of both buffers unwritten."""
    r = default_run()
    mine = re.findall(r"^PASS  n = +(\d+)  pingpong (forward|inverse)  radices ([\dx]+)  pad \d+  threads (\d+) for "
                      r"(\d+) butterflies .*pads written 0  result where expected yes$", r.stdout, re.M)
    assert sorted((n, d) for n, d, *_ in mine) == sorted((str(n), d) for n in (4320, 6000, 8640)
                                                          for d in ("forward", "inverse")), r.stdout
    for n, _, radices, threads, most in mine:
        assert math.prod(map(int, radices.split("x"))) == int(n) and int(most) > int(threads), (n, radices)
    assert not re.search(r"^FAIL", r.stdout, re.M), r.stdout


def test_the_fused_ends_equal_the_dft():
    """fft-large's fused ends on the CPU: stage 0 read through a loader (block_fft_from, its loads
    hoisted out of the radix switch; block_fft_correlate's inlined per radix) with every input
    live, at most two a butterfly (the pruned dft_two) and one; the correlation's pair
    (block_fft_correlate: the forward's last stage and the inverse's first as one step, the product
    between them, the inverse's last stage handed out from registers), every coefficient and every
    output seen exactly once, no input read beyond the live ones, each read told its place in its
    butterfly (pass 3's twiddle); and its forward half alone."""
    r = default_run()
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    for n in (1, 2, 60, 210, 343, 2160, 4320):
        mine = [x for x in lines if re.match(rf"PASS  n = +{n}  (from|correlate)", x)]
        assert len(mine) == 7, (n, mine)
        assert all("reads beyond 0  wrong r 0" in x for x in mine), mine
        assert sum("each once yes" in x for x in mine) == 3, mine
    # 4320 = 16 x 15 x 18 as one transform; the pair reverses its inverse's radices.
    pair = next(x for x in lines if x.startswith("PASS  n =  4320  correlate live 4320"))
    radices = re.search(r"radices ([\dx]+)", pair).group(1).split("x")
    assert sorted(map(int, radices)) == [15, 16, 18], pair


def test_every_order_and_layout_is_the_same_dft():
    """block_fft_host picks the order of the radices and the layout; each candidate must be a
    correct transform, the ones it did not pick too (3-stage lengths of distinct radices: 280 has
    six orders, 360 three, 240 two; three layouts each, forward and inverse)."""
    r = run([host(), "--layouts", "240", "280", "360"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "66 passed, 0 failed" in r.stdout, r.stdout
    seen = set(re.findall(r"^PASS  n = +(\d+)  \w+  radices ([\dx]+)  pad (\d+)", r.stdout, re.M))
    assert {o for n, o, _ in seen if n == "280"} == {"5x7x8", "5x8x7", "7x5x8", "7x8x5", "8x5x7", "8x7x5"}
    assert {p for _, _, p in seen} == {"4", "5", "31"}


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
        if rest == ["none"]:
            out[int(n)] = None
            continue
        at = rest.index("threads")
        keys = dict(zip(rest[at::2], map(int, rest[at + 1::2])))
        out[int(n)] = ([int(x) for x in rest[:at]], keys["threads"], keys)
    return out


def test_every_schedule_multiplies_to_its_length_within_the_thread_limit():
    s = schedules()
    smooth = [n for n in range(1, 8193) if all(p in (2, 3, 5, 7) for p in prime_factors(n))]
    assert sorted(s) == smooth
    for n, sched in s.items():
        if sched is None:
            continue
        radices, threads, _ = sched
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


def test_the_layout_takes_the_bank_conflicts_out_of_the_template_matching_lengths():
    """A half-warp's stores land R elements apart in a stage's first steps: with a pad element
    every 16, 2160 = 15 x 12 x 12 put 15 of 16 lanes of the radix-15 stage on one bank pair (3.2x
    the ideal wavefronts in all); no pad is 1.16x. The host's choice never costs more than the
    first order in the densest layout, and is within 1.2x of the ideal at 2160, 4320 and 4096."""
    s = schedules()
    for n, sched in s.items():
        if sched is not None:
            k = sched[2]
            assert k["ideal"] <= k["wavefronts"] <= k["first"], (n, k)
    for n, pad in ((2160, 31), (4320, 4), (4096, 4)):
        k = s[n][2]
        assert k["pad"] == pad and k["wavefronts"] <= 1.2 * k["ideal"], (n, k)
    assert s[2160][2]["first"] > 3 * s[2160][2]["ideal"]


def test_every_need_up_to_the_longest_schedule_has_a_length_close_above_it():
    """fft-large takes the smallest scheduled length >= its need (scheduled_length): up to 5832 =
    18^3, block_fft's longest, at most 13% above the need (the area of a 2-D transform at most 27%);
    beyond it a column takes the long pass (below), a row's half none (fft-large refuses the problem
    and names fft)."""
    served = sorted(n for n, v in schedules().items() if v is not None)
    assert served[-1] == 5832
    worst = max(min(n for n in served if n >= need) / need for need in range(1, 5833))
    assert worst < 1.13, worst


def test_every_length_up_to_the_long_limit_has_a_long_schedule():
    """The long schedules (block_fft_pingpong's: any number of butterflies a stage, radices up to
    18, at most 8 stages) cover every 7-smooth length up to 11664, so that a column of an 8192 x
    8192 image (8640 with a 384 template) or any need up to 11664 has a length at most ~4% above it."""
    r = run([host(), "--long-schedules"])
    assert r.returncode == 0, r.stderr
    long = {}
    for line in r.stdout.splitlines():
        n, *rest = line.split()
        assert rest != ["none"], line
        at = rest.index("butterflies")
        long[int(n)] = [int(x) for x in rest[:at]]
    smooth = [n for n in range(1, 11665) if all(p in (2, 3, 5, 7) for p in prime_factors(n))]
    assert sorted(long) == smooth
    for n, radices in long.items():
        assert math.prod(radices) == n and all(q <= 18 for q in radices) and len(radices) <= 8, (n, radices)
    assert long[8640] and len(long[8640]) == 4  # 8640 > 18^3: four stages
    worst = max(min(n for n in smooth if n >= need) / need for need in range(5833, 11665))
    assert worst < 1.05, worst


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
