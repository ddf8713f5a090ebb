"""scripts/dev/sass-diff --mix: the static instruction mix of a kernel, by class (an account of
where a kernel's instructions go; no GPU and no cuobjdump needed here: a synthetic dump)."""
import shutil

from suite_helpers import load_script

sass_diff = load_script("dev/sass-diff")

DUMP = """
	code for sm_90a
		Function : _ZN5xcorr6kernelEv
        /*0000*/                   S2R R0, SR_TID.X ;                       /* 0x0000000000007919 */
                                                                            /* 0x000e220000002100 */
        /*0010*/                   LEA R2, R0, UR7, 0x3 ;                   /* 0x0000000700027c11 */
                                                                            /* 0x000fca000f8e18ff */
        /*0020*/                   LDS.64 R4, [R2] ;                        /* 0x0000000002047984 */
                                                                            /* 0x000e240000000a00 */
        /*0030*/                   FFMA R4, R4, R5, R4 ;                    /* 0x0000000504047223 */
                                                                            /* 0x001fe40000000004 */
        /*0040*/               @P0 FADD R5, R5, -R4 ;                       /* 0x8000000405050221 */
                                                                            /* 0x000fe20000000000 */
        /*0050*/                   STG.E.64 desc[UR8][R6.64], R4 ;          /* 0x0000000406007986 */
                                                                            /* 0x000fe2000c101b08 */
        /*0060*/                   DFMA R8, R8, R8, R8 ;                    /* 0x0000000808087229 */
                                                                            /* 0x000fe20000000008 */
        /*0070*/                   EXIT ;                                   /* 0x000000000000794d */
                                                                            /* 0x000fea0003800000 */
"""


def test_mix_counts_each_class_and_sees_through_predicates():
    funcs = sass_diff.functions(DUMP)
    assert list(funcs) == ["_ZN5xcorr6kernelEv"]
    m = sass_diff.mix(funcs["_ZN5xcorr6kernelEv"])
    assert m == {"FP32": 2, "int/addr": 1, "shared": 1, "global": 1, "const": 0, "move/uniform": 1,
                 "control": 1, "other": 1}
    line = sass_diff.format_mix(m)
    assert line.split(":")[0].strip() == "8" and "FP32 2 (25%)" in line and "const" not in line


def test_mix_selects_kernels_by_name():
    got = sass_diff.kernels({"obj": (DUMP, "")}, "kernel")
    assert len(got) == 1
    name, (m, regs) = next(iter(got.items()))
    assert regs == "?" and sum(m.values()) == 8
    if shutil.which("c++filt"):
        assert name == "xcorr::kernel()"  # demangled, as the REGEX sees it
    assert sass_diff.kernels({"obj": (DUMP, "")}, "no such kernel") == {}
