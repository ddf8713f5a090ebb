"""The peers' turn: on several GPUs of one host, no two peers (PyTorch, CuPy, NPP: Python, bound by
host work at small sizes) are timed at once, while everything else runs side by side.

What is held is the timing, not the process. A peer process spends almost all of its time before
its first repetition: the imports and the CUDA context (3-6 s), and per case the peer's set-up,
its first call (cuDNN's autotuning, cuFFT's plans) and the validation against the float64
reference (up to 8 s a case); the timed repetitions of the quick protocol are 0.03-0.5 s a case
(notes/multi-gpu.md, session 56). Holding the turn for whole processes made the peers of the
normalization group a serial 72 s of its 107 s on one H100; holding it for the timing alone lets
the GPUs ready their peers side by side and wait for each other only while one is timed.

The turn is an exclusive fcntl.flock on the file that XCORR_PEER_TURN names (set by
run_experiments for every peer process it starts, one file per host, so that its GPUs and other
runners on the host take turns; unset, as when peerbench is run by hand, nothing is locked): the
kernel drops it when its holder exits, even by SIGKILL, so a crashed peer cannot keep it."""
from __future__ import annotations

import contextlib
import fcntl
import os
import time

ENV = "XCORR_PEER_TURN"
_waited = [0.0]  # seconds this process has waited for the turn (waited())


def waited() -> float:
    """The seconds this process has spent waiting for the turn so far (peerbench's log)."""
    return _waited[0]


@contextlib.contextmanager
def turn(env=os.environ):
    """Held while a peer's case is timed (its pilot and repetitions); waits for another process's
    turn to end. A no-op without XCORR_PEER_TURN."""
    path = env.get(ENV)
    if not path:
        yield
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)  # a lock folder not made yet
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        began = time.monotonic()
        fcntl.flock(fd, fcntl.LOCK_EX)
        _waited[0] += time.monotonic() - began
        yield
    finally:
        os.close(fd)  # closing drops the lock
