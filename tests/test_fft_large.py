"""fft-large (algorithms/53_fft_large.cu) as a user calls it, at transforms beyond fft-fused's 1024:
the maps against a float64 reference (odd, unequal sizes, both signs, an offset, the output
poisoned), the maximum over a template stack that "auto" routes to it (the planted template found
at its place, the answer equal to cuFFT's chunked maps then the fold), and a plan whose left is
declared fixed. The validator (xcorr_validate --variant fft-large) checks every form, window and
reduction on small shapes; these check the sizes the variant is for. GPU tests: skipped, with the
reason, where there is no GPU."""
import numpy as np
import pytest
import scipy.signal

xcorr = pytest.importorskip("xcorr")


def reference_same(left, right):
    """scipy.signal.correlate2d(left, right, 'same') in float64, through FFTs (the direct sum is
    too slow at these sizes on a CPU)."""
    full = scipy.signal.fftconvolve(left.astype(np.float64), right[::-1, ::-1].astype(np.float64), mode="full")
    hR, wR = right.shape
    dy, dx = (hR - 1) - (hR - 1) // 2, (wR - 1) - (wR - 1) // 2
    return full[dy:dy + left.shape[0], dx:dx + left.shape[1]]


def test_large_maps_equal_the_float64_reference(gpu):
    rng = np.random.default_rng(7)
    left = (rng.uniform(-1, 1, (701, 653)) + 40.0).astype(np.float32)  # an offset: the sums are large
    rights = rng.uniform(-1, 1, (3, 397, 381)).astype(np.float32)
    plan = xcorr.Plan(left.shape, rights.shape, algorithm="fft-large")
    out = np.full((3, 701 + 397 - 1, 653 + 381 - 1), np.nan, np.float32)  # poisoned: every element written
    got = plan(left, rights, out=out)
    for k in range(3):
        want = scipy.signal.fftconvolve(left.astype(np.float64), rights[k, ::-1, ::-1].astype(np.float64))
        err = np.linalg.norm(got[k] - want) / np.linalg.norm(want)
        assert err < 1e-5, (k, err)
    # the peak of each map where the float64 map has it
    assert [np.unravel_index(np.argmax(got[k]), got[k].shape) for k in range(3)] == \
        [np.unravel_index(np.argmax(scipy.signal.fftconvolve(left.astype(np.float64),
                                                           rights[k, ::-1, ::-1].astype(np.float64))),
                          got[k].shape) for k in range(3)]


def planted_image(rng, shape, templates, which, top_left, gain):
    image = rng.standard_normal(shape).astype(np.float32)
    t = templates[which]
    y, x = top_left
    image[y:y + t.shape[0], x:x + t.shape[1]] += gain * t
    return image


def zero_mean_unit_norm(rng, count, h, w):
    t = rng.standard_normal((count, h, w))
    t -= t.mean(axis=(1, 2), keepdims=True)
    return (t / np.linalg.norm(t, axis=(1, 2), keepdims=True)).astype(np.float32)


def test_auto_folds_a_large_template_search_in_fft_large_and_finds_the_template(gpu):
    rng = np.random.default_rng(11)
    templates = zero_mean_unit_norm(rng, 7, 41, 37)
    image = planted_image(rng, (1101, 1043), templates, which=4, top_left=(530, 611), gain=12.0)
    plan = xcorr.Plan(image.shape, templates.shape, mode="same", reduce="max_over_rights", stats=True)
    assert plan.algorithm == "fft-large", plan.explain()
    assert "fft-large" in plan.explain() and "no map written" in plan.explain()
    best = plan(image, templates)
    # The template's centre in the "same" map: its top-left plus (h - 1) // 2, (w - 1) // 2.
    peak = np.unravel_index(np.nanargmax(best.value), best.value.shape)
    assert peak == (530 + 20, 611 + 18)
    assert best.index[peak] == 4
    # The same answer as cuFFT's maps folded afterwards.
    ref = xcorr.max_over_rights(image, templates, mode="same", stats=True, algorithm="fft")
    scale = np.abs(ref.value).max()
    assert np.allclose(best.value, ref.value, atol=1e-5 * scale)
    clear = np.abs(best.value - ref.value) < 1e-6 * scale  # no near-tie between two templates there
    gap = np.sort(np.stack([xcorr.correlate2d(image, templates[j], mode="same", algorithm="fft")
                            for j in range(7)]), axis=0)
    distinct = (gap[-1] - gap[-2]) > 1e-4 * scale
    assert np.array_equal(best.index[clear & distinct], ref.index[clear & distinct])
    assert np.allclose(best.sum, ref.sum, atol=1e-4 * scale) and np.allclose(best.sumsq, ref.sumsq, rtol=1e-4)


def test_a_streamed_search_continues_in_fft_large(gpu):
    """Templates in batches (out=, first_index=): the indices continue, the answer is one call's."""
    rng = np.random.default_rng(12)
    templates = zero_mean_unit_norm(rng, 9, 33, 35)
    image = planted_image(rng, (1077, 1100), templates, which=7, top_left=(100, 900), gain=10.0)
    whole = xcorr.max_over_rights(image, templates, mode="same", stats=True)
    best = None
    for j in range(0, 9, 4):
        best = xcorr.max_over_rights(image, templates[j:j + 4], mode="same", stats=True, out=best, first_index=j)
    assert np.array_equal(best.value, whole.value) and np.array_equal(best.index, whole.index)
    assert np.allclose(best.sum, whole.sum, rtol=0, atol=1e-9 * np.abs(whole.sum).max())
    assert best.index[100 + 16, 900 + 17] == 7


def test_a_fixed_left_is_transformed_once_and_gives_the_same_answers(gpu):
    rng = np.random.default_rng(13)
    image = rng.standard_normal((1031, 1049)).astype(np.float32)
    a, b = (zero_mean_unit_norm(rng, 3, 29, 31) for _ in range(2))
    each = xcorr.Plan(image.shape, a.shape, mode="same", algorithm="fft-large", reduce="max_over_rights")
    fixed = xcorr.Plan(image.shape, a.shape, mode="same", algorithm="fft-large", params={"left": "fixed"},
                       reduce="max_over_rights")
    assert fixed.params == {"left": "fixed"}
    for rights in (a, b):  # the second call reuses the first call's spectrum of the image
        x, y = each(image, rights), fixed(image, rights)
        assert np.array_equal(x.value, y.value) and np.array_equal(x.index, y.index)


@pytest.mark.parametrize("image_shape,template_shape", [((4096, 61), (384, 17)), ((59, 4096), (13, 384)),
                                                        ((4096, 4096), (384, 384)), ((5903, 45), (29, 13)),
                                                        ((8192, 61), (384, 17)), ((8192, 8192), (384, 384)),
                                                        ((59, 5760), (13, 384)), ((4092, 5760), (384, 384))],
                         ids=["columns-4320", "rows-4320", "2dtm-4096", "columns-6000-long", "columns-8640-long",
                              "2dtm-8192", "rows-6144-wide", "k3-5760x4092"])
def test_the_2dtm_lengths_equal_the_float64_reference_and_find_the_template(gpu, image_shape, template_shape):
    """At 4320 points (a 4096 image and a 384 template in "same": 2-D template matching's size,
    the block FFT's 18 x 16 x 15 and the rows' half 15 x 12 x 12) along the columns alone, the rows
    alone and both; and columns beyond block_fft's 5832 (6000, and 8640: an 8192 x 8192 image's),
    which take the long column pass (column_long_kernel), alone and with 8640-point rows; and rows
    wider than pass 3's 4096 columns held in registers (a K3 micrograph's 5760: one block a row,
    the columns beyond them in shared memory; 8192: the maps so, the maximum in two column chunks,
    its state not fitting one block's shared memory). The maps
    against float64 (the image offset by 25, the output poisoned); the maximum over templates finds
    the planted one at its place and equals the maps' own fold."""
    rng = np.random.default_rng(17)
    n = 3 if image_shape[1] >= 4096 and image_shape[0] >= 4096 else 5
    templates = zero_mean_unit_norm(rng, n, *template_shape)
    y0, x0 = image_shape[0] // 3, image_shape[1] // 5
    image = planted_image(rng, image_shape, templates, which=n - 2, top_left=(y0, x0), gain=12.0)
    plan = xcorr.Plan(image.shape, templates.shape, mode="same", algorithm="fft-large")
    offset = image + np.float32(25.0)
    maps = plan(offset, templates, out=np.full((n, *image_shape), np.nan, np.float32))
    for k in (0, n - 2, n - 1):  # the last: alone in the last step of pass 3, which takes pairs
        want = reference_same(offset, templates[k])
        err = np.linalg.norm(maps[k] - want) / np.linalg.norm(want)
        assert err < 1e-5, (k, err)
    maps = plan(image, templates, out=np.full((n, *image_shape), np.nan, np.float32))
    best = xcorr.max_over_rights(image, templates, mode="same", stats=True, algorithm="fft-large")
    peak = np.unravel_index(np.nanargmax(best.value), best.value.shape)
    assert peak == (y0 + (template_shape[0] - 1) // 2, x0 + (template_shape[1] - 1) // 2)
    assert best.index[peak] == n - 2
    scale = np.abs(maps).max()
    assert np.allclose(best.value, maps.max(axis=0), rtol=0, atol=1e-6 * scale)
    assert np.allclose(best.sum, maps.astype(np.float64).sum(axis=0), rtol=0, atol=1e-5 * scale)
    assert np.allclose(best.sumsq, (maps.astype(np.float64) ** 2).sum(axis=0), rtol=1e-5, atol=1e-5 * scale ** 2)


def test_a_plan_needing_less_shared_memory_leaves_an_earlier_larger_plan_working(gpu):
    """A kernel's limit of dynamic shared memory a block is the kernel's, not a plan's: a plan that
    needs less of it, made after one that needs more (here pass 3's maximum: ~135 KB against
    ~70 KB), must not lower it, or the first plan's next call fails to launch."""
    rng = np.random.default_rng(23)
    templates = zero_mean_unit_norm(rng, 3, 13, 384)
    image = planted_image(rng, (59, 4096), templates, which=1, top_left=(20, 900), gain=12.0)
    big = xcorr.Plan(image.shape, templates.shape, mode="same", algorithm="fft-large", reduce="max_over_rights")
    first = big(image, templates)
    small_templates = zero_mean_unit_norm(rng, 3, 9, 11)
    small_image = rng.standard_normal((300, 280)).astype(np.float32)
    small = xcorr.Plan(small_image.shape, small_templates.shape, mode="same", algorithm="fft-large",
                       reduce="max_over_rights")
    small(small_image, small_templates)
    again = big(image, templates)
    assert np.array_equal(first.value, again.value, equal_nan=True) and np.array_equal(first.index, again.index)
    peak = np.unravel_index(np.nanargmax(again.value), again.value.shape)
    assert peak == (20 + 6, 900 + 191) and again.index[peak] == 1


@pytest.mark.gpu_exclusive
def test_a_search_the_free_gpu_memory_does_not_hold_is_a_memory_error_and_writes_nothing(gpu):
    """A template search whose plan does not fit the GPU's free memory (here: the rest taken by a
    PyTorch tensor) raises xcorr.GPUMemoryError, a MemoryError and a ValueError, in one line naming
    what the plan needs, and leaves the earlier result it was to continue (out=) as it was; with the
    memory free again the same call runs and finds the planted template."""
    torch = pytest.importorskip("torch", reason="PyTorch (the test takes the GPU's memory with a tensor)")
    rng = np.random.default_rng(23)
    templates = zero_mean_unit_norm(rng, 5, 192, 160)
    image = planted_image(rng, (2048, 2048), templates, which=3, top_left=(700, 900), gain=12.0)
    img, temps = torch.from_numpy(image).cuda(), torch.from_numpy(templates).cuda()
    best = xcorr.max_over_rights(img, temps[:2], mode="same", stats=True)
    xcorr.clear_cache()  # the first call's plan: else the retry after freeing the cache would fit
    torch.cuda.synchronize()
    before = [x.clone() for x in best]
    hog, spare = None, 16 << 20
    free = torch.cuda.mem_get_info()[0]
    while hog is None and free > spare:
        try:
            hog = torch.empty(free - spare, dtype=torch.uint8, device="cuda")
        except torch.cuda.OutOfMemoryError:
            free -= 64 << 20
    assert hog is not None
    try:
        # fft-large by name: auto would go on to the chunked maps, whose own refusal may come from
        # cuFFT (a CudaError where cuFFT calls it an internal error)
        with pytest.raises(xcorr.GPUMemoryError, match=r"not enough GPU memory for fft-large: .* needs \d+ MiB") as e:
            xcorr.max_over_rights(img, temps[2:], mode="same", stats=True, out=best, first_index=2,
                                  algorithm="fft-large")
        assert isinstance(e.value, MemoryError) and isinstance(e.value, ValueError)
    finally:
        del hog
        torch.cuda.empty_cache()
    torch.cuda.synchronize()
    for x, y in zip(best, before):  # nothing written to the result it was to continue
        assert torch.equal(x, y)
    xcorr.max_over_rights(img, temps[2:], mode="same", stats=True, out=best, first_index=2, algorithm="fft-large")
    peak = np.unravel_index(int(torch.argmax(best.value)), tuple(best.value.shape))
    assert peak == (700 + 95, 900 + 79) and int(best.index[peak]) == 3
