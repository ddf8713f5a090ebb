"""The source tree's layout, checked on the CPU from the sources alone: the library in
lib/ (its public headers in lib/xcorr/, spelled "xcorr/<file>"), the benchmark harness in harness/,
the xcorr tool in tools/, the variants' shared building blocks (device and host halves) in
algorithms/common/. The library's headers include one another without a cycle, and neither the
library nor the variants reach into the harness."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

# What harness/ holds: the benchmark harness (xcorr_bench), the validator (xcorr_validate), the
# check of a variant's output against the references and the record of a run's context. Anything
# the library (lib/) or the Python package builds on belongs in lib/.
# reduce_check.hpp: the check of a reduced answer (peaks, maxima) against the reference maps,
# shared by xcorr_validate, xcorr_bench and xcorr run --validate as check.hpp is. Its headers are
# spelled "harness/<file>"; "xcorr/<file>" names the library's (lib/xcorr/) only.
HARNESS_FILES = {
    "bench_main.cpp", "validate_main.cpp", "check.cpp", "context.cpp", "version.hpp.in",
    "check.hpp", "context.hpp", "reduce_check.hpp",
}


def includes(path):
    return INCLUDE.findall(path.read_text(errors="replace"))


def sources(folder, exts=(".cpp", ".cu", ".cuh", ".hpp", ".h", ".c")):
    return sorted(p for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix in exts)


def test_harness_holds_no_library_source():
    held = {p.relative_to(ROOT / "harness").as_posix() for p in (ROOT / "harness").rglob("*") if p.is_file()}
    assert held <= HARNESS_FILES, f"harness/ is the benchmark harness only; move these to lib/ or tools/: " \
        f"{sorted(held - HARNESS_FILES)}"


def test_library_headers_include_one_another_without_a_cycle():
    headers = {p.name: p for p in (ROOT / "lib" / "xcorr").iterdir() if p.suffix in (".hpp", ".h")}
    assert {"plan.hpp", "core.hpp", "xcorr.h", "auto.hpp"} <= set(headers)
    graph = {}
    for name, path in headers.items():
        deps = [i.split("/", 1)[1] for i in includes(path) if i.startswith("xcorr/")]
        missing = [d for d in deps if d not in headers]
        assert not missing, f"lib/xcorr/{name} includes headers that are not the library's: {missing}"
        graph[name] = deps

    state = {}  # name -> 1 on the current path, 2 done

    def visit(name, path):
        state[name] = 1
        for d in graph[name]:
            if state.get(d) == 1:
                cycle = path[path.index(d):] + [d]
                raise AssertionError("include cycle: " + " -> ".join(cycle))
            if d not in state:
                visit(d, path + [d])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def test_library_and_variants_do_not_include_the_harness():
    lib_headers = {p.name for p in (ROOT / "lib" / "xcorr").iterdir()}
    for folder in ("lib", "algorithms", "python"):
        for path in sources(folder):
            for inc in includes(path):
                assert not inc.startswith("harness/"), f"{path.relative_to(ROOT)} includes {inc}"
                if inc.startswith("xcorr/"):
                    assert inc.split("/", 1)[1] in lib_headers, f"{path.relative_to(ROOT)} includes {inc}"


def test_one_include_prefix_per_folder():
    """"xcorr/<file>" is a header of lib/xcorr/ and "harness/<file>" one of harness/, wherever it is
    included from: no prefix names two folders."""
    lib_headers = {p.name for p in (ROOT / "lib" / "xcorr").iterdir()}
    harness_headers = {p.name for p in (ROOT / "harness").iterdir() if p.suffix in (".hpp", ".h")}
    assert {"check.hpp", "context.hpp", "reduce_check.hpp"} <= harness_headers
    assert not (ROOT / "harness" / "xcorr").exists(), "harness/xcorr/: the harness's headers are harness/<file>"
    for folder in ("lib", "algorithms", "harness", "tools", "python", "tests"):
        for path in sources(folder):
            for inc in includes(path):
                prefix, _, name = inc.partition("/")
                if prefix == "xcorr":
                    assert name in lib_headers, f"{path.relative_to(ROOT)} includes {inc}: not a header of lib/xcorr/"
                elif prefix == "harness":
                    assert name in harness_headers, f"{path.relative_to(ROOT)} includes {inc}: not a header of harness/"
    build = (ROOT / "meson.build").read_text()
    assert not re.search(r"include_directories\([^)]*'harness'", build), \
        "harness/ is no include directory of its own: its headers are spelled harness/<file> from the root"


def test_building_blocks_keep_their_halves_together():
    """Every host launch helper of algorithms/common/ sits beside the device code it launches, and
    nothing includes a launch helper by its old xcorr/ spelling."""
    common = ROOT / "algorithms" / "common"
    for name in ("launch.cuh", "multi_matrix_launch.cuh", "shift_tiles_launch.cuh"):
        assert (common / name).is_file(), name
        assert not (ROOT / "lib" / "xcorr" / name).exists(), name
    for path in sources("algorithms") + sources("lib") + sources("harness") + sources("tools"):
        for inc in includes(path):
            assert not re.fullmatch(r"xcorr/\w*launch\.cuh", inc), f"{path.relative_to(ROOT)}: {inc}"
    listed = (common / "README.md").read_text()
    for path in common.glob("*.cuh"):
        assert f"`{path.name}`" in listed, f"algorithms/common/README.md does not list {path.name}"


def test_normalization_is_one_translation_unit():
    """lib/normalize/'s passes share internal-linkage helpers: only normalizer.cu is compiled, it
    includes every pass, and nothing else includes them (no kernel is instantiated twice)."""
    folder = ROOT / "lib" / "normalize"
    assert sorted(p.name for p in folder.glob("*.cu")) == ["normalizer.cu"]
    passes = {f"normalize/{p.name}" for p in folder.glob("*.cuh")}
    assert {"normalize/internal.cuh", "normalize/prepass.cuh", "normalize/tables.cuh",
            "normalize/epilogue.cuh"} <= passes
    assert passes <= set(includes(folder / "normalizer.cu"))
    build = (ROOT / "meson.build").read_text()
    assert "'lib/normalize/normalizer.cu'" in build and "lib/normalize/prepass" not in build
    for folder_name in ("lib", "algorithms", "harness", "tools", "python", "tests"):
        for path in sources(folder_name):
            if path.parent == folder:
                continue
            assert not passes & set(includes(path)), f"{path.relative_to(ROOT)} includes a normalization pass"


# A bare cudaMemcpy from host memory: cudaMemcpy(<dst>, <src>, <bytes>, cudaMemcpyHostToDevice),
# the call written over one or more lines.
BARE_UPLOAD = re.compile(r"\bcudaMemcpy\s*\((?:[^;]*?)cudaMemcpyHostToDevice\s*\)", re.S)


def bare_uploads(text):
    return len(BARE_UPLOAD.findall(text))


@pytest.mark.parametrize("text,hits", [
    ("XC_CUDA_CHECK(cudaMemcpy(tw.get(), h.data(), n * sizeof(float2), cudaMemcpyHostToDevice));", 1),
    ("cudaMemcpy(a.get(), b.data(), n,\n                 cudaMemcpyHostToDevice);", 1),
    ("cudaMemcpyAsync(a, b, n, cudaMemcpyHostToDevice, stream);", 0),
    ("upload(tw, h.data(), n);", 0),
    ("cudaMemcpy(h.data(), d.get(), n, cudaMemcpyDeviceToHost);", 0),
])
def test_bare_upload_detector(text, hits):
    assert bare_uploads(text) == hits


def test_plans_copy_their_tables_with_upload():
    """A variant's or the library's table copied to the GPU by a bare cudaMemcpy may still be in
    flight when the plan's first kernel reads it: cudaMemcpy from pageable memory returns once the
    data is staged, and its DMA is ordered only on the default stream, which a caller's non-blocking
    stream (the validator's, the benchmark's) does not wait for. fft-large's twiddles and untangling
    table were copied so and gave one wrong one-to-one map beside other processes on the GPU.
    upload() (lib/xcorr/device_buffer.hpp) waits for the copy; only it may make the bare call."""
    allowed = {ROOT / "lib" / "xcorr" / "device_buffer.hpp"}
    found = [p.relative_to(ROOT).as_posix() for p in sources("algorithms") + sources("lib")
             if p not in allowed and bare_uploads(p.read_text(errors="replace"))]
    assert not found, f"a bare cudaMemcpy to the GPU in {found}: use upload() (lib/xcorr/device_buffer.hpp)"
    assert bare_uploads((ROOT / "lib" / "xcorr" / "device_buffer.hpp").read_text()) == 1
