"""What `xcorr run` tells its user while it waits or works, on the CPU: a FIFO given as --out that
nobody reads yet (the write waits for a reader) and a long float64 CPU reference run (a progress
line) each say so on stderr, where they had looked like a hang; a quick run off a terminal stays
silent (tests and scripts parse its stderr)."""
import os
import pty
import re
import select
import subprocess
import time

import numpy as np

from conftest import run, save, seeded_rng

PROGRESS = re.compile(r"xcorr: the float64 CPU reference: (\d+)% of the output rows after (\d+) s, about (\d+) s left")


def reference_run(xcorr, left, right, out, *extra):
    return [str(xcorr), "run", "--algorithm", "reference", "--form", "one-to-one", str(left), str(right),
            "--out", str(out), *map(str, extra)]


def readline_within(stream, seconds):
    """A line of `stream` (a child's pipe), or "" where none comes within `seconds`."""
    ready, _, _ = select.select([stream], [], [], seconds)
    return stream.readline() if ready else ""


def inputs_and_plain_output(xcorr, tmp_path, seed):
    """Two small inputs and the output xcorr run writes for them to a plain file (what a FIFO's
    reader must receive)."""
    rng = seeded_rng(seed)
    left = save(tmp_path / "l.npy", rng.random((6, 7), dtype=np.float32))
    right = save(tmp_path / "r.npy", rng.random((3, 2), dtype=np.float32))
    plain = tmp_path / "plain.npy"
    assert run(reference_run(xcorr, left, right, plain)).returncode == 0
    return left, right, plain


def test_a_fifo_without_a_reader_is_said_to_wait_for_one(xcorr, tmp_path):
    """--out a FIFO that nobody reads: xcorr computed, then waited in open() for a reader without a
    word. One line on stderr now says that it waits for a reader of that FIFO; the reader that comes
    gets the whole output, and xcorr ends without another line. `xcorr run --help` says so too."""
    left, right, plain = inputs_and_plain_output(xcorr, tmp_path, 5)
    fifo = tmp_path / "pipe.npy"
    os.mkfifo(fifo)
    p = subprocess.Popen(reference_run(xcorr, left, right, fifo), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    try:
        line = readline_within(p.stderr, 60)
        assert re.fullmatch(r"xcorr: waiting for a reader of the FIFO \S*pipe\.npy: the output is written once one "
                            r"opens it\n", line), line
        assert p.poll() is None  # still waiting
        got = fifo.read_bytes()
        assert p.wait(60) == 0
        assert p.stderr.read() == ""
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert got == plain.read_bytes()
    usage = run([str(xcorr), "run", "--help"]).stdout
    assert re.search(r"FIFO[^\n]*\n?[^\n]*waits for a reader", usage), usage


def test_a_fifo_with_a_reader_gets_the_output_without_a_note(xcorr, tmp_path):
    """A reader already there: no line on stderr, and the reader gets all of the output (the probe
    for a reader keeps its write end open until the output is written, so the reader never sees an
    end of file before it)."""
    left, right, plain = inputs_and_plain_output(xcorr, tmp_path, 6)
    fifo = tmp_path / "pipe.npy"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader before xcorr starts
    try:
        r = run(reference_run(xcorr, left, right, fifo), timeout=60)
        chunks = []
        while chunk := os.read(reader, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(reader)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert b"".join(chunks) == plain.read_bytes()


def test_a_long_cpu_reference_run_shows_its_progress(xcorr, tmp_path):
    """A float64 CPU reference estimated at 2 s or more (here 1024 x 1024 against 48 x 48: 2.4e9
    multiply-adds) prints, off a terminal, a progress line every 2 s or more (a tenth of the estimate)
    and a last line when done; the output is the same as without them."""
    rng = seeded_rng(12)
    left = save(tmp_path / "l.npy", rng.random((1024, 1024), dtype=np.float32))
    right = save(tmp_path / "r.npy", rng.random((48, 48), dtype=np.float32))
    out = tmp_path / "o.npy"
    t0 = time.monotonic()
    r = run(reference_run(xcorr, left, right, out, "--mode", "valid"))
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines and re.fullmatch(r"xcorr: the float64 CPU reference: done in \d+ s", lines[-1]), r.stderr
    progress = [PROGRESS.fullmatch(line) for line in lines[:-1]]
    assert all(progress), r.stderr
    if took > 3:  # a line is due 2 s after the start
        assert progress, r.stderr
    shares = [int(m.group(1)) for m in progress]
    assert shares == sorted(shares) and all(0 <= s <= 100 for s in shares), shares
    assert np.load(out).shape == (1, 977, 977)


def test_a_quick_cpu_reference_run_is_silent_off_a_terminal_and_erases_its_line_on_one(xcorr, tmp_path):
    """A quick run: nothing on stderr where it is a pipe or a file (what scripts parse); on a
    terminal the progress line is drawn in place and erased when done, leaving the terminal as it
    was."""
    rng = seeded_rng(13)
    left = save(tmp_path / "l.npy", rng.random((64, 64), dtype=np.float32))
    right = save(tmp_path / "r.npy", rng.random((8, 8), dtype=np.float32))
    r = run(reference_run(xcorr, left, right, tmp_path / "pipe.npy"))
    assert r.returncode == 0 and r.stderr == "", r.stderr
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(reference_run(xcorr, left, right, tmp_path / "tty.npy"), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        slave = -1
        assert p.wait(60) == 0
        seen = b""
        while select.select([master], [], [], 1)[0]:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # EIO: the terminal's other side is closed and drained
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    text = seen.decode()
    assert re.match(r"\r\x1b\[Kxcorr: the float64 CPU reference: \d+% of the output rows, \d+ s, about \d+ s left",
                    text), repr(text)
    assert text.endswith("\r\x1b[K"), repr(text)
    assert np.array_equal(np.load(tmp_path / "tty.npy"), np.load(tmp_path / "pipe.npy"))
