"""The .npy reader of `xcorr` against numpy's own reading of the same bytes.

numpy is the specification (numpy/lib/format.py): np.load's verdict on a file decides what the
tool must do with it. Where np.load refuses a file, `xcorr run` must refuse it too: exit 2, one
line on stderr naming the file. Where np.load accepts it with a dtype, rank and layout the tool
takes (float32/float64, C order, rank 2 or 3, no zero dimension, no bytes after the data), the
tool must compute the correlation of exactly the array np.load returned. Where np.load accepts
something the tool refuses by design (rank 1, an int dtype, Fortran order, an empty dimension,
trailing bytes, True/False as a dimension), exit 2 with one line is right.

Every run is under a 2 GiB address-space limit, so that a reader that allocates what a header
declares before checking the file's size fails here instead of passing slowly.

test_known_breakages holds the cases found broken by hand (each one failed against the regex
reader); test_fuzzed_files_agree_with_numpy applies a few hundred seeded mutations to files
written by numpy and checks every one. The seed is printed (run pytest -s to see it)."""
import functools
import io
import os
import random
import resource
import shutil
import struct
import subprocess
import tokenize
import warnings

import numpy as np
import pytest

from conftest import save, seeded_rng
from xcorr_np import correlate

try:  # numpy's own header parser (np.load calls it); private, so found where numpy keeps it
    from numpy.lib._format_impl import _read_array_header
except ImportError:  # numpy < 2
    from numpy.lib.format import _read_array_header

# XCORR_FUZZ_SEED and XCORR_FUZZ_MUTATIONS explore further; the suite runs the fixed default.
SEED = int(os.environ.get("XCORR_FUZZ_SEED", 20250611))
MUTATIONS = int(os.environ.get("XCORR_FUZZ_MUTATIONS", 400))
AS_LIMIT = 2 << 30  # bytes of address space for each tool run


def limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


@functools.cache
def prlimit():
    """util-linux's prlimit, which sets the same limit (soft and hard) and execs the tool: a start
    without preexec_fn, which makes subprocess fork this whole process (half the CPU of a run of
    the fuzzer's 404). Checked to set it; None where it is missing (preexec_fn then)."""
    exe = shutil.which("prlimit")
    if exe is None:
        return None
    wrapper = [exe, f"--as={AS_LIMIT}", "--"]
    limits = subprocess.run(wrapper + ["cat", "/proc/self/limits"], capture_output=True, text=True, check=True)
    line = next(x for x in limits.stdout.splitlines() if x.startswith("Max address space"))
    assert line.split()[3:5] == [str(AS_LIMIT)] * 2, line
    return wrapper


def npy_file(header, data=b"", version=(1, 0), hlen=None, pad=True):
    """A .npy file with the given header text: numpy's layout (magic, version, length, header padded
    with spaces and a newline to a multiple of 64 bytes), with each part open to corruption."""
    raw = header.encode("utf-8" if version[0] >= 3 else "latin-1")
    lenfmt = "<H" if version[0] == 1 else "<I"
    if pad:
        total = 6 + 2 + struct.calcsize(lenfmt) + len(raw) + 1
        raw += b" " * (-total % 64) + b"\n"
    n = len(raw) if hlen is None else hlen
    return b"\x93NUMPY" + bytes(version) + struct.pack(lenfmt, n % (1 << (8 * struct.calcsize(lenfmt)))) + raw + data


def header_of(shape, descr="<f4", fortran="False"):
    return "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)


def numpy_verdict(path):
    """What np.load makes of the file: (array, reason the tool may refuse it or None), or
    (None, why numpy refuses it). numpy's Python 2 header repair (version 1 and 2) warns: taken as
    a refusal, the tool reads only the headers Python 3 numpy writes."""
    data = path.read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            f = io.BytesIO(data)
            version = np.lib.format.read_magic(f)
            shape, fortran, dtype = _read_array_header(f, version)
            declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
            left = len(data) - f.tell()
            if all(d >= 0 for d in shape) and declared > left:
                # What np.load says ("Failed to read all data"), without letting it allocate the
                # declared size first.
                return None, "truncated"
            with np.errstate(all="ignore"):
                array = np.load(path, allow_pickle=False)
        except Exception as e:  # every way np.load refuses a file
            return None, f"{type(e).__name__}: {e}"
    if not isinstance(array, np.ndarray):
        return None, "not an array"
    if dtype.kind != "f" or dtype.itemsize not in (4, 8) or dtype.shape != ():
        return array, f"dtype {dtype}"
    if len(shape) not in (2, 3):
        return array, f"rank {len(shape)}"
    if fortran:
        return array, "fortran order"
    if dtype.itemsize == 8:
        with np.errstate(all="ignore"):
            beyond = np.isfinite(array) & ~np.isfinite(array.astype(np.float32))
        if beyond.any():
            return array, "float64 values beyond float32's range"
    if any(type(d) is bool for d in shape):
        return array, "True/False as a dimension"
    spelling = python_spelling(data)
    if spelling:
        return array, spelling
    if 0 in shape:
        return array, "empty"
    if left > declared:
        return array, "trailing bytes"
    return array, None


def python_spelling(data):
    """The Python spellings that numpy reads in a header but never writes, which the tool refuses
    (docs/computed.md): string prefixes, escapes and line continuations, triple quotes, adjacent strings,
    0x/0o/0b integers. None for a header without them."""
    lenfmt = "<H" if data[6] == 1 else "<I"
    start = 8 + struct.calcsize(lenfmt)
    text = data[start:start + struct.unpack(lenfmt, data[8:start])[0]].decode("utf-8" if data[6] == 3 else "latin-1")
    previous = None
    for t in tokenize.generate_tokens(io.StringIO(text).readline):
        if t.type == tokenize.STRING:
            if t.string[0] not in "'\"" or "\\" in t.string or t.string[:3] in ("'''", '"""'):
                return f"string spelled {t.string}"
            if previous == tokenize.STRING:
                return "adjacent strings"
        if t.type == tokenize.NUMBER and t.string[:2].lower() in ("0x", "0o", "0b"):
            return f"integer spelled {t.string}"
        if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            previous = t.type
    if "\\" in text:
        return "a line continuation"
    return None


def start_tool(xcorr, left, right, out):
    cmd = [xcorr, "run", "--algorithm", "reference", "--form", "n-to-m", str(left), str(right), "--out", str(out)]
    wrapper = prlimit()
    return subprocess.Popen((wrapper or []) + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            encoding="utf-8", errors="backslashreplace",
                            preexec_fn=None if wrapper else limit_memory)


def judge(path, right, out, proc, label):
    """None if the tool did what numpy's verdict requires, else what went wrong."""
    stdout, stderr = proc.communicate(timeout=120)
    array, refusal = numpy_verdict(path)
    lines = stderr.strip().splitlines()
    if refusal:
        if proc.returncode != 2 or len(lines) != 1 or str(path) not in lines[0]:
            return (f"{label}: expected exit 2 and one line naming {path.name} ({refusal[:200]}); "
                    f"got {proc.returncode}: {stderr!r}")
        if out.exists():
            return f"{label}: refused, but wrote {out.name}"
        return None
    if proc.returncode != 0:
        return f"{label}: numpy reads {array.dtype} {array.shape}; tool exit {proc.returncode}: {stderr!r}"
    got = np.load(out)
    with np.errstate(all="ignore"):
        lefts = array.astype(np.float32).astype(np.float64).reshape((-1,) + array.shape[-2:])
        want = correlate("n-to-m", lefts, np.load(right).astype(np.float64)[None]).astype(np.float32)
    finite = np.isfinite(want)
    scale = np.abs(want[finite]).max() if finite.any() else 0.0
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-6 * scale, equal_nan=True):
        return f"{label}: output differs from the correlation of np.load's array {array.shape}"
    return None


def check_files(xcorr, tmp_path, files, batch=8):
    """Runs the tool on every (label, bytes) as the left input (a few processes at a time) and
    returns the failures."""
    right = save(tmp_path / "right.npy", np.arange(6, dtype=np.float32).reshape(2, 3) / 7)
    failures = []
    for start in range(0, len(files), batch):
        running = []
        for i, (label, data) in enumerate(files[start:start + batch], start):
            path, out = tmp_path / f"m{i:04d}.npy", tmp_path / f"o{i:04d}.npy"
            path.write_bytes(data)
            running.append((path, out, start_tool(xcorr, path, right, out), f"#{i} {label}"))
        for path, out, proc, label in running:
            failure = judge(path, right, out, proc, label)
            if failure:
                failures.append(failure + f"\n    file: {path.read_bytes()[:200]!r}")
    return failures


# --- cases found broken by hand -------------------------------------------------------------

F4 = lambda n: np.arange(n, dtype="<f4").tobytes()  # noqa: E731

KNOWN = {
    # read as 7 x 9 and the run succeeded
    "negative dimension": (npy_file(header_of("(-7, 9)"), F4(63)), "refuse"),
    # read as a 3 x 4 x 4 stack
    "float dimension": (npy_file(header_of("(3.4, 4)"), F4(48)), "refuse"),
    # std::bad_alloc (exit 1), and 3.5 GB allocated for 8.7 s before "truncated"
    "huge declared size": (npy_file(header_of("(100000, 100000)"), F4(32)), "refuse"),
    "large declared size": (npy_file(header_of("(30000, 30000)"), F4(32)), "refuse"),
    # 2^21 * 2^21 * 2^22 = 2^64: the signed product wrapped to 0
    "shape product overflows": (npy_file(header_of("(2097152, 2097152, 4194304)"), F4(4)), "refuse"),
    # "stoll" (exit 1)
    "20-digit dimension": (npy_file(header_of("(12345678901234567890, 4)"), F4(8)), "refuse"),
    # echoed the header over two lines
    "multi-line malformed header": (npy_file("{'descr': '<f4',\n 'fortran_order': False}"), "refuse"),
    # a dict literal keeps the last value of a key; the regex took the first
    "duplicated shape key": (npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), "
                                      "'shape': (3, 4), }", F4(12)), "accept"),
    # numpy reads '|f4' as float32
    "byte order |": (npy_file(header_of("(3, 4)", "|f4"), F4(12)), "accept"),
    "no byte order, numpy's names": (npy_file(header_of("(3, 4)", "float32"), F4(12)), "accept"),
    # np.load checks these; the regex reader did not
    "version 1.1": (npy_file(header_of("(3, 4)"), F4(12), version=(1, 1)), "refuse"),
    "extra key": (npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), 'x': 1}", F4(12)), "refuse"),
    "shape as a list": (npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': [3, 4]}", F4(12)), "refuse"),
    "header over numpy's 10000 characters": (npy_file(header_of("(3, 4)") + " " * 10000, F4(12)), "refuse"),
    # np.load reads the declared count and ignores the rest; the tool refuses it (docs/computed.md)
    "trailing bytes": (npy_file(header_of("(3, 4)"), F4(13)), "refuse"),
    # correlated as inf (exit 0); refused by design (docs/computed.md)
    "float64 beyond float32's range": (npy_file(header_of("(3, 4)", "<f8"), np.full(12, 1e300).tobytes()),
                                       "refuse"),
    # numpy (Python's parser) refuses 200 nested brackets, the header's dict one of them; the tool
    # recursed into any depth (a deep enough one ran the stack out: a crash)
    "parentheses nested 200 deep": (npy_file(header_of("(" * 199 + "(3, 4)" + ")" * 199), F4(12)), "refuse"),
    "parentheses nested 199 deep": (npy_file(header_of("(" * 198 + "(3, 4)" + ")" * 198), F4(12)), "accept"),
    # numpy accepts Python's spellings, which the parser must follow
    "Python spellings": (npy_file("\n{\"descr\":'<f4' ,'fortran_order':False,# c\n'shape':((3),(+4)),}", F4(12),
                                  version=(3, 0)), "accept"),
}


@pytest.mark.parametrize("name", KNOWN)
def test_known_breakages(xcorr, tmp_path, name):
    data, expect = KNOWN[name]
    failures = check_files(xcorr, tmp_path, [(name, data)])
    assert not failures, failures[0]
    array, refusal = numpy_verdict(tmp_path / "m0000.npy")
    assert (array is not None and refusal is None) == (expect == "accept"), (array, refusal)


# --- the fuzzer -----------------------------------------------------------------------------

def seed_files():
    """Files as numpy writes them, every version and both float dtypes and byte orders."""
    def written(array, version):
        buf = io.BytesIO()
        np.lib.format.write_array(buf, array, version=version)
        return buf.getvalue()
    rng = seeded_rng(SEED)
    return [
        written(rng.random((3, 4), dtype=np.float32), (1, 0)),
        written(rng.random((2, 3, 4)), (1, 0)),
        written(rng.random((3, 5)).astype(">f4"), (2, 0)),
        written(rng.random((1, 2, 3), dtype=np.float32), (3, 0)),
    ]


def split(data):
    """(version, header text, data bytes) of a numpy-written file."""
    version = (data[6], data[7])
    lenfmt = "<H" if version[0] == 1 else "<I"
    start = 8 + struct.calcsize(lenfmt)
    n = struct.unpack(lenfmt, data[8:start])[0]
    return version, data[start:start + n].decode("latin-1").rstrip(" \n"), data[start + n:]


NUMBERS = ["-7", "0", "1", "2", "3.4", "1e3", "3j", "0x3", "007", "00", "1_2", "1__2", "3L", "+3", "- 3", "--3",
           "-(3)", "(3)", "True", "None", "100000", str(2**31), str(2**63), str(2**64 + 3), "12345678901234567890",
           "30000", "4194304"]
DESCRS = ["<f4", "|f4", "=f4", ">f4", "f4", "<f8", ">f8", "|f8", "f", "d", ">d", "float32", "float64", "single",
          "double", "float", "<f2", "<i4", "<f16", "<c8", "f 4", "f04", "f+4", "f-4", "4f4", "<F4", "<d8", "|b1",
          "<u4", "<f4 ", "<float32", "O", "!f4", ""]
SPACES = [" ", "\t", "\n", "\r", "\f", "\v", "\x00", "# c\n", "\n ", "\\\n"]


def mutate(rnd, base):
    """One seeded mutation of a numpy-written file: (label, bytes)."""
    version, header, data = split(base)
    kind = rnd.choice(["flip", "flip", "number", "sign", "bracket", "key", "duplicate", "descr", "fortran",
                       "space", "edit", "quote", "length", "truncate", "append", "version", "padding", "huge"])
    pos = rnd.randrange(len(header) + 1)
    if kind == "flip":  # 1 to 3 bit flips anywhere, mostly in the header
        b = bytearray(base)
        end = len(base) if rnd.random() < 0.2 else len(base) - len(data)
        for _ in range(rnd.randint(1, 3)):
            i = rnd.randrange(end)
            b[i] ^= 1 << rnd.randrange(8)
        return kind, bytes(b)
    if kind == "number":
        dims = header[header.index("(") + 1:header.rindex(")")].split(",")
        dims = [d for d in dims if d.strip()]
        dims[rnd.randrange(len(dims))] = rnd.choice(NUMBERS)
        header = header[:header.index("(") + 1] + ", ".join(dims) + ("," if len(dims) == 1 else "") + \
            header[header.rindex(")"):]
        return f"{kind} {header}", npy_file(header, data, version)
    if kind == "sign":
        digits = [i for i, c in enumerate(header) if c.isdigit()]
        i = rnd.choice(digits)
        header = header[:i] + rnd.choice("-+") + header[i:]
    elif kind == "bracket":
        shape = header[header.index("("):header.rindex(")") + 1]
        header = header.replace(shape, rnd.choice([
            shape.replace("(", "["), shape.replace(")", ""), shape.replace("(", ""), "(" + shape + ")",
            shape[1:-1], shape[:-1] + ",)", shape[:-1] + ",,)", "()", "(,)", shape + shape, "(" + shape + ",)",
            shape.replace(",", ""), shape.replace(", ", ",\n"), shape.replace(")", "]")]))
    elif kind == "key":
        key = rnd.choice(["'descr'", "'fortran_order'", "'shape'"])
        header = header.replace(key, rnd.choice([key.upper(), key[:-2] + "'", key.replace("'", '"'), key[1:-1],
                                                 key + " ", '"' + key[1:], "'x'", "b" + key, "u" + key]))
    elif kind == "duplicate":
        header = header.rstrip("} ") + " " + rnd.choice([
            "'shape': (2, 6), ", "'shape': (12,), ", "'shape': (2, 2), ", "'descr': '<f8', ", "'descr': '<i4', ",
            "'fortran_order': True, ", "'fortran_order': False, ", "'extra': 1, ", "'shape': (3, 4)"]) + "}"
    elif kind == "descr":
        header = header.replace(header.split("'")[3], rnd.choice(DESCRS), 1)
    elif kind == "fortran":
        header = header.replace("False", rnd.choice(["True", "0", "1", "None", "'False'", "false", "(False)"]))
    elif kind == "space":
        header = header[:pos] + rnd.choice(SPACES) + header[pos:]
    elif kind == "edit":  # delete or double one character
        header = header[:pos] + (header[pos:pos + 1] * 2 if rnd.random() < 0.5 else "") + header[pos + 1:]
    elif kind == "quote":
        i = rnd.choice([i for i, c in enumerate(header) if c == "'"])
        header = header[:i] + rnd.choice(['"', "", "''", "\\'"]) + header[i + 1:]
    elif kind == "length":
        file = npy_file(header, data, version)
        n = len(file) - len(data) - 8 - (2 if version[0] == 1 else 4)
        n = rnd.choice([0, 1, n - 1, n + 1, n - 16, n + 16, n + len(data), 65535, 2**31, 2**32 - 1])
        return f"length {n}", npy_file(header, data, version, hlen=max(n, 0))
    elif kind == "truncate":
        return kind, base[:rnd.randrange(len(base))]
    elif kind == "append":
        return kind, base + bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 16)))
    elif kind == "version":
        v = (rnd.choice([0, 1, 2, 3, 4, 255]), rnd.choice([0, 0, 1]))
        if rnd.random() < 0.5:  # the bytes alone, the length field left as it was
            return f"version bytes {v}", base[:6] + bytes(v) + base[8:]
        return f"version {v}", npy_file(header, data, v)
    elif kind == "padding":
        filler = rnd.choice(["\x00", "x", "\t", " " * 10001, "", "\n\n", " #", "\f"])
        return f"padding {filler[:3]!r}", npy_file(header + filler, data, version, pad=rnd.random() < 0.5)
    elif kind == "huge":
        shape = rnd.choice(["(100000, 100000)", "(30000, 30000)", "(2097152, 2097152, 4194304)",
                            "(1099511627776, 1)", "(4, 1073741825)", "(65536, 65536, 65536)"])
        return f"huge {shape}", npy_file(header_of(shape, header.split("'")[3]), data, version)
    return f"{kind} {header!r}", npy_file(header, data, version)


def test_fuzzed_files_agree_with_numpy(xcorr, tmp_path):
    print(f"npy fuzzer seed {SEED}, {MUTATIONS} mutations")
    rnd = random.Random(SEED)
    bases = seed_files()
    files = [("unmutated", b) for b in bases] + [mutate(rnd, rnd.choice(bases)) for _ in range(MUTATIONS)]
    failures = check_files(xcorr, tmp_path, files)
    assert not failures, f"seed {SEED}: {len(failures)} of {len(files)} files:\n" + "\n".join(failures[:15])
