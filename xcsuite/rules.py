"""The library's counting rules for the suite: python/xcorr/_rules.py, the package's own module
(standard library only), loaded by path so that the compiled package is not needed (each
rule written once; tests/test_rules.py holds that module to the C++ through the binding).

    transform_need(s0, s1, m, n)   points of one dimension of fft's transform (0: no shift overlaps)
    overlap_total(s0, s1, m, n)    one dimension's overlap lengths summed over shifts s0..s1
    out_count(form, nL, nR)        output matrices of a call
    pair_of(form, nL, nR, k)       (left, right) of output k
    pairs(form, nL, nR)            every output's (left, right), in output order
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # xcsuite.paths's; nothing of the suite imported (spec.py imports this)

_NAME = "xcorr_rules"  # one module per process, whoever loads it first
_rules = sys.modules.get(_NAME)
if _rules is None:
    _spec = importlib.util.spec_from_file_location(_NAME, ROOT / "python" / "xcorr" / "_rules.py")
    _rules = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_rules)
    sys.modules[_NAME] = _rules

FORMS = _rules.FORMS
transform_need = _rules.transform_need
overlap_total = _rules.overlap_total
out_count = _rules.out_count
pair_of = _rules.pair_of
pairs = _rules.pairs
