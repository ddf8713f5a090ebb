"""scripts/dev/ncu-hotspots on a source page of ncu's shape (SASS lines, their stall samples,
shared-memory wavefronts and executed instructions): the stall reasons' shares, the instruction
with the most excess wavefronts named first with its ratio to the ideal, the opcodes without
predicates or modifiers, the straight-line stretches by the instructions they execute; and a file
that is no such page refused in one line. CPU only."""
import subprocess
import sys

from suite_helpers import ROOT, load_script

SCRIPT = ROOT / "scripts" / "dev" / "ncu-hotspots"
hotspots = load_script("dev/ncu-hotspots")

HEADER = ['Address', 'Source', 'Warp Stall Sampling (All Samples)', 'Warp Stall Sampling (Not-issued Samples)',
          'Instructions Executed', 'L1 Wavefronts Shared Excessive', 'L1 Wavefronts Shared',
          'L1 Wavefronts Shared Ideal', 'stall_barrier', 'stall_barrier (Not Issued)', 'stall_mio']
ROWS = [
    ['0x10', 'LDGSTS.E.64 desc[UR8][R4.64], [R3]', '20', '18', '1,000', '15000', '16000', '1000', '5', '5', '15'],
    ['0x20', '@!P2  BRA 0x40', '60', '55', '2,000', '0', '0', '0', '60', '55', '0'],
    ['0x30', 'STS.64 [R101], R2', '10', '9', '1,000', '3000', '4000', '1000', '0', '0', '10'],
    ['0x40', 'FFMA R1, R2, R3, R4', '10', '2', '6,000', '0', '0', '0', '5', '1', '5'],
]


def page(tmp_path, kernel="void pass3_kernel<1, 2>(Args)", rows=ROWS):
    lines = [f'"Kernel Name","{kernel}",'] + [",".join(f'"{c}"' for c in row) for row in [HEADER] + rows]
    path = tmp_path / "k-sass.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_three_tables_of_one_kernel(tmp_path):
    kernel, rows = hotspots.read(page(tmp_path))
    text = hotspots.report(kernel, rows, top=8)
    lines = text.splitlines()
    assert lines[0] == "kernel: void pass3_kernel<1, 2>(Args)"
    # stalls: barrier 70 of 100 samples, mio 30; the "(Not Issued)" twin is not a reason of its own
    assert lines[1] == "stall reasons (100 samples):"
    assert lines[2].split() == ["barrier", "70.0%"] and lines[3].split() == ["mio", "30.0%"]
    assert "Not Issued" not in text
    # wavefronts: 18000 excess of 20000; the cp.async first (15000, 16x the ideal), then the store (4x)
    at = lines.index("shared-memory wavefronts: 20000, excess 18000 (90%); most excess (wavefronts / ideal):")
    assert lines[at + 1].split()[:2] == ["0x10", "LDGSTS.E.64"] and lines[at + 1].endswith("16.0x")
    assert lines[at + 2].split()[:2] == ["0x30", "STS.64"] and lines[at + 2].endswith("4.0x")
    # the mix: FFMA 6000 of 10000 executed, the predicated branch counted as BRA
    stretches = next(i for i, line in enumerate(lines) if line.startswith("hottest stretches"))
    mix = lines[lines.index("instruction mix (10000 warp instructions):") + 1:stretches]
    assert [m.split() for m in mix] == [["FFMA", "60.0%"], ["BRA", "20.0%"], ["LDGSTS", "10.0%"], ["STS", "10.0%"]]
    # every instruction a stretch of its own here (each count differs from its neighbour's): FFMA's first
    assert lines[stretches + 1].split() == ["0x40", "1", "x", "6000", "60.0%", "10.0%", "FFMA:1"]
    assert len(lines) == stretches + 5


def test_a_stretch_is_consecutive_instructions_executed_equally_often(tmp_path):
    """A butterfly's straight-line code is one row however long; an instruction that did not run
    (or ran another number of times) ends it, and the same count after it starts a new one."""
    def row(address, source, executed, samples):
        return [address, source, str(samples), "0", executed, "0", "0", "0", str(samples), "0", "0"]
    rows = [row("0x10", "FADD R1, R2, R3", "400", 10), row("0x20", "@P0 FFMA R1, R2, R3, R4", "400", 20),
            row("0x30", "FADD R5, R2, R3", "400", 10), row("0x40", "IADD3 R1, R2, R3, RZ", "100", 5),
            row("0x50", "LEA R1, R2, R3, 0x3", "100", 5), row("0x60", "EXIT", "0", 0),
            row("0x70", "IADD3 R1, R2, R3, RZ", "100", 50)]
    text = hotspots.report(*hotspots.read(page(tmp_path, rows=rows)), top=8)
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("hottest stretches"))
    # 1,500 instructions executed, 100 samples: 3 x 400 (80%), 2 x 100 (13.3%), 1 x 100 (6.7%)
    assert [line.split() for line in lines[at + 1:]] == [
        ["0x10", "3", "x", "400", "80.0%", "40.0%", "FADD:2", "FFMA:1"],
        ["0x40", "2", "x", "100", "13.3%", "10.0%", "IADD3:1", "LEA:1"],
        ["0x70", "1", "x", "100", "6.7%", "50.0%", "IADD3:1"]]


def test_as_a_user_runs_it_and_what_it_refuses(tmp_path, capsys):
    r = subprocess.run([sys.executable, str(SCRIPT), str(page(tmp_path)), "--top", "1"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.count("\n  ") == 4, r.stdout + r.stderr  # one row a table
    details = tmp_path / "details.txt"
    details.write_text("  Section: GPU Speed Of Light Throughput\n    Duration  ms  3.31\n")
    for path, why in ((tmp_path / "absent.csv", "no such file"),
                      (details, "no Address column: not ncu's source page")):
        assert hotspots.main([str(path)]) == 2
        assert capsys.readouterr().err.startswith(f"ncu-hotspots: {path}: {why}")
    r = subprocess.run([sys.executable, str(SCRIPT), str(details)], capture_output=True, text=True)
    assert r.returncode == 2 and not r.stdout
    assert r.stderr == f"ncu-hotspots: {details}: no Address column: not ncu's source page " \
                       "(--page source --csv --print-source sass)\n"


def test_a_page_of_two_launches_reads_the_first_and_says_so(tmp_path, capsys):
    """ncu prints one source page a kernel; a report of two launches (`-c 2`) put the second's
    "Kernel Name" and header lines among the first's rows, whose short fields crashed the sums."""
    one = page(tmp_path).read_text()
    second = page(tmp_path, kernel="void select_kernel(Args)", rows=[ROWS[3], ROWS[3][:4]]).read_text()
    path = tmp_path / "two-sass.csv"
    path.write_text(one + second)
    kernel, rows = hotspots.read(path)
    assert kernel == "void pass3_kernel<1, 2>(Args)" and [r["Address"] for r in rows] == ["0x10", "0x20", "0x30", "0x40"]
    assert "the page holds 2 kernels' sources; the first is read" in capsys.readouterr().err
    assert hotspots.report(kernel, rows, top=8) == hotspots.report(*hotspots.read(page(tmp_path)), top=8)
    # a row shorter than the header (the second page's last) counts its missing fields as 0
    _, short = hotspots.read(page(tmp_path, rows=[ROWS[3], ROWS[3][:4]]))
    assert short[1]["Instructions Executed"] == 0.0 and short[1]["stall_barrier"] == 0.0
    assert hotspots.report("", short, top=8).splitlines()[0] == "stall reasons (20 samples):"
