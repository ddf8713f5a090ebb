"""The experiment definitions (experiments/*.py) and their expansion into benchmark cases."""
import json

import pytest
from fake_xcorr import PEERS
from suite_helpers import ROOT, suite_registry

import experiments as suite
from xcsuite.spec import (MAX_FULL_GRID, SATURATED_MAX_FMAS, Experiment, Series, Shape, case_key, clamp_to_count,
                               expand)
from xcsuite.benchjson import parse_run_name

REGISTRY = suite_registry()
WITH_PEERS = REGISTRY + PEERS  # the runner's registry: the build's and the peers' (peerbench list)


def test_every_experiment_loads_and_expands():
    names = suite.names()
    for required in ["fig15", "fig16", "fig17", "fig18", "fig19", "fig20", "fig21", "fig22", "fig23", "nmn",
                     "table1", "efficiency", "windows", "piv", "autocorr", "window_table"]:
        assert required in names
    allowed = {v["name"]: v for v in WITH_PEERS}
    for exp in suite.load_all():
        ex = expand(exp, WITH_PEERS)
        if exp.derived_from:
            assert not ex.cases and set(exp.derived_from) <= set(names)
            continue
        assert ex.cases, exp.name
        keys = [c.key for c in ex.cases]
        assert len(keys) == len(set(keys)), f"{exp.name}: duplicated cases"
        for c in ex.cases:
            info = allowed[c.variant]
            assert c.shape.form in info["forms"]
            assert dict(c.params).keys() == info["params"].keys(), c.line()
            for k, v in c.params:
                assert v in info["params"][k], c.line()
        assert not ex.warnings, ex.warnings  # the fixture registry holds every variant the suite names


def test_case_key_matches_the_benchmark_run_name():
    exp = suite.load("fig19")
    case = expand(exp, REGISTRY).cases[0]
    s = case.shape
    run_name = (f"{case.variant}/{s.form}/hL:{s.hL}/wL:{s.wL}/hR:{s.hR}/wR:{s.wR}/nL:{s.nL}/nR:{s.nR}"
                + "".join(f"/{k}:{v}" for k, v in case.params) + "/min_time:0.100/repeats:10/manual_time")
    variant, dims, params = parse_run_name(run_name)
    assert case_key(variant, dims, params) == case.key


def test_run_name_parsing_keeps_a_threads_parameter_but_drops_google_suffixes():
    v, dims, params = parse_run_name("block-per-overlap/n-to-m/hL:16/wL:8/hR:4/wR:2/nL:3/nR:5/threads:128"
                                     "/min_time:0.010/repeats:3/manual_time/threads:1")
    assert v == "block-per-overlap" and dims == ("n-to-m", 16, 8, 4, 2, 3, 5) and params == {"threads": "128"}
    with pytest.raises(ValueError):
        parse_run_name("split-row/one-to-one/hL:16/wL:16")


def test_saturated_shapes_cap_the_copies_but_not_below_saturation():
    shapes = {s.hL: s for s in suite.load("fig15").shapes}
    assert shapes[16].nL == shapes[16].nR == 4000 and shapes[16].form == "n-to-mn"
    assert shapes[256].nL == int(SATURATED_MAX_FMAS / 256 ** 4) == 465
    assert all(s.fmas <= SATURATED_MAX_FMAS for s in shapes.values() if s.nL < 4000)
    fig21 = {s.hL: s for s in suite.load("fig21").shapes}
    assert fig21[64].nL == fig21[64].nR == 128 and fig21[256].nL % 4 == 0 and fig21[256].nL < 128


def test_clamp_to_count_takes_the_largest_instantiated_value():
    c = clamp_to_count(8)
    assert c(Shape.one_to_many(16, 2), ["8", "1", "2", "4"]) == "2"
    assert c(Shape.one_to_many(16, 32), ["8", "1", "2", "4"]) == "8"
    assert clamp_to_count(4, "left")(Shape.n_to_m(16, 2, 8), ["4", "1"]) == "1"
    assert clamp_to_count(4)(Shape.n_to_mn(16, 2, 3), ["4", "1", "2"]) == "2"  # 3 rights per left
    ex = expand(suite.load("fig19"), REGISTRY)
    rights = {dict(c.params)["rights"] for c in ex.cases if c.shape.nR == 2}
    assert rights == {"1", "2"}  # "8 x 1" is 2 x 1 with 2 rights, as in the paper


def test_missing_variant_uses_alt_or_is_reported():
    reg = [v for v in REGISTRY if v["name"] != "grouped-overlap"]
    ex = expand(suite.load("fig15"), reg)
    assert ex.cases and {c.variant for c in ex.cases} == {"multi-matrix-right+grouped-overlap"}
    assert all(dict(c.params)["rights"] == "1" for c in ex.cases)
    reg = [v for v in REGISTRY if v["name"] != "split-row"]
    ex = expand(suite.load("fig16"), reg)
    assert not ex.cases and ex.warnings and "split-row" in ex.warnings[0]


def test_parameter_value_not_instantiated_is_left_out_with_a_reason():
    exp = Experiment("t", "t", "t", [Shape.one_to_one(16)],
                     [Series("a", "split-row", {"rows": "3"}), Series("b", "split-row", {"rows": "1"})])
    ex = expand(exp, REGISTRY)
    assert [c.line() for c in ex.cases] == [
        "variant=split-row form=one-to-one hL=16 wL=16 hR=16 wR=16 nL=1 nR=1 distribution=triangle rows=1 warps=4"]
    assert any("rows=3 not instantiated" in r for _, _, r in ex.unavailable)


def test_tune_star_full_grid_or_one_parameter_at_a_time():
    shape = Shape.one_to_one(32)
    small = expand(Experiment("t", "t", "t", [shape], [Series("a", "register-tiled", tune="*")]), REGISTRY)
    grid = next(v for v in REGISTRY if v["name"] == "register-tiled")["params"]
    assert len(grid) == 2 and len(small.cases) == len(grid["rows"]) * len(grid["waves"])  # the full grid
    big = expand(Experiment("t", "t", "t", [shape], [Series("a", "warp-per-overlap-shared", tune="*")]), REGISTRY)
    full = 3 * 3 * 2 * 2
    assert full > MAX_FULL_GRID and len(big.cases) == 1 + 2 + 2 + 1 + 1


def test_caps_and_form_filters():
    ex = expand(suite.load("fig23"), REGISTRY)
    big = [c for c in ex.cases if c.variant == "overlap-wise"]
    assert big and max(c.fmas for c in big) <= 2e12
    assert not [c for c in ex.cases if c.variant.startswith("multi-matrix-both") and c.fmas > 2e13]
    t1 = expand(suite.load("table1"), REGISTRY)
    assert not [c for c in t1.cases if c.variant == "split-row" and c.shape.form != "one-to-one"]
    assert not [c for c in t1.cases if c.variant == "warp-per-overlap" and c.shape.hL > 256]
    assert {c.shape.count_label for c in t1.cases} == {"1-to-1", "1-to-2", "1-to-8", "1-to-32", "2-to-2", "8-to-8",
                                                       "32-to-32"}
    assert {c.shape.hL for c in t1.cases} == {16, 32, 64, 128, 192, 256, 384, 512}


def test_nmn_real_data_shape():
    shapes = [s for s in suite.load("nmn").shapes if s.hL == 96]
    assert len(shapes) == 1 and (shapes[0].nL, shapes[0].nR, shapes[0].form) == (86, 4300, "n-to-mn")


def test_every_family_is_documented():
    """A variant's family decides its figure group, table columns, cost-model rate and the claims it
    counts in (docs/contributing.md, "Families"): every family of the registry and the peers is in
    that table and in xcsuite.registry.FAMILIES."""
    from xcsuite.registry import FAMILIES

    doc = (ROOT / "docs" / "contributing.md").read_text()
    for fam in {v["family"] for v in WITH_PEERS}:
        assert fam in FAMILIES, f"family {fam!r}: add it to xcsuite/registry.py's FAMILIES"
        assert f"| `{fam}` |" in doc, f"family {fam!r}: add it to docs/contributing.md's Families table"
