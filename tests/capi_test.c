/* The C API from C (built by meson as xcorr_capi_test; run by tests/test_plan.py).
 * Checks the errors that need no GPU, then either the no-GPU status (exit 3) or, with a GPU,
 * one plan executed and compared with a direct sum (exit 0). Any other outcome: exit 1. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xcorr/xcorr.h"

static int expect_usage(const xcorr_spec* s, const char* needle) {
    xcorr_plan* p = NULL;
    xcorr_status st = xcorr_plan_create(s, &p);
    if (st != XCORR_ERROR_USAGE || p != NULL || !strstr(xcorr_last_error(), needle)) {
        fprintf(stderr, "expected a usage error naming '%s', got status %d: %s\n", needle, (int)st, xcorr_last_error());
        return 0;
    }
    printf("usage error: %s\n", xcorr_last_error());
    return 1;
}

int main(void) {
    xcorr_spec s;
    xcorr_spec_init(&s);
    s.h_left = s.w_left = 7;
    s.h_right = s.w_right = 3;

    xcorr_spec bad = s;
    bad.normalize = "ncc";  /* zncc and zero-lag exist; an unknown name is refused */
    if (!expect_usage(&bad, "unknown normalization")) return 1;
    bad = s;
    bad.precision = "fp16";
    if (!expect_usage(&bad, "precision")) return 1;
    bad = s;
    bad.algorithm = "no-such-algorithm";
    if (!expect_usage(&bad, "unknown algorithm")) return 1;
    bad = s;
    bad.params = "rows=4";
    if (!expect_usage(&bad, "auto")) return 1;
    bad = s;
    bad.h_left = 0;
    if (!expect_usage(&bad, "")) return 1;
    if (xcorr_plan_create(NULL, NULL) != XCORR_ERROR_USAGE) return 1;
    /* Reductions (CONVENTIONS.md, "Reductions"): refused before a GPU is needed. */
    bad = s;
    bad.reduce = "argmax";
    if (!expect_usage(&bad, "unknown reduce")) return 1;
    bad = s;
    bad.reduce = "peaks";
    bad.k = 0;
    if (!expect_usage(&bad, "k must be at least 1")) return 1;
    bad = s;
    bad.reduce = "peaks";
    bad.subpixel = "cubic";
    if (!expect_usage(&bad, "sub-pixel")) return 1;
    bad = s;
    bad.reduce = "max-over-rights";
    if (!expect_usage(&bad, "stack of rights")) return 1;

    /* A batch in pieces on the CPU (the reference): n-to-m, 2 x 3 pairs of 7 x 7 * 3 x 3 in pieces of at
     * most 2 outputs (one-to-many pieces: each left's 3 outputs are cut 2 + 1), against a direct sum. */
    {
        xcorr_spec b = s;
        b.form = XCORR_N_TO_M;
        b.n_left = 2;
        b.n_right = 3;
        b.algorithm = "reference";
        float BL[2 * 49], BR[3 * 9], BO[6 * 81];
        for (int i = 0; i < 2 * 49; ++i) BL[i] = (float)((i * 7) % 13) - 6.0f;
        for (int i = 0; i < 3 * 9; ++i) BR[i] = (float)((i * 5) % 11) - 5.0f;
        const int two[2] = {0, 1};
        if (xcorr_run_batch(&b, BL, BR, BO, two, 2, 2) != XCORR_ERROR_USAGE ||
            !strstr(xcorr_last_error(), "reference runs on the CPU")) {
            fprintf(stderr, "the reference with devices: expected a usage error, got: %s\n", xcorr_last_error());
            return 1;
        }
        if (xcorr_run_batch(&b, BL, BR, BO, NULL, 0, 2) != XCORR_OK) {
            fprintf(stderr, "xcorr_run_batch: %s\n", xcorr_last_error());
            return 1;
        }
        xcorr_release_batch_buffers(); /* none kept by the CPU path: a no-op that must link and return */
        for (int k = 0; k < 6; ++k)
            for (int y = 0; y < 9; ++y)
                for (int x = 0; x < 9; ++x) {
                    const int dy = y - 2, dx = x - 2;
                    const float* Lk = BL + (k / 3) * 49;
                    const float* Rk = BR + (k % 3) * 9;
                    double ref = 0;
                    for (int r = 0; r < 3; ++r)
                        for (int c = 0; c < 3; ++c)
                            if (r + dy >= 0 && r + dy < 7 && c + dx >= 0 && c + dx < 7)
                                ref += Lk[(r + dy) * 7 + c + dx] * Rk[r * 3 + c];
                    if (BO[k * 81 + y * 9 + x] != (float)ref) {
                        fprintf(stderr, "batch out[%d][%d][%d] = %g, expected %g\n", k, y, x, BO[k * 81 + y * 9 + x], ref);
                        return 1;
                    }
                }
        printf("batch of 6 in pieces on the CPU: ok\n");
    }

    xcorr_plan* plan = NULL;
    xcorr_status st = xcorr_plan_create(&s, &plan);
    if (st == XCORR_ERROR_NO_GPU) {
        if (plan != NULL || strlen(xcorr_last_error()) == 0) return 1;
        printf("no GPU: %s\n", xcorr_last_error());
        return 3;
    }
    if (st != XCORR_OK) {
        fprintf(stderr, "xcorr_plan_create failed (%d): %s\n", (int)st, xcorr_last_error());
        return 1;
    }
    /* A device ordinal that does not exist is bad usage (it came back as a CUDA error, status 4). */
    {
        float BL[49] = {0}, BR[9] = {0}, BO[81] = {0};
        const int missing[1] = {99};
        if (xcorr_run_batch(&s, BL, BR, BO, missing, 1, 0) != XCORR_ERROR_USAGE ||
            !strstr(xcorr_last_error(), "does not exist")) {
            fprintf(stderr, "device 99: expected a usage error, got: %s\n", xcorr_last_error());
            return 1;
        }
    }
    int64_t n = 0, h = 0, w = 0;
    if (xcorr_plan_out_shape(plan, &n, &h, &w) != XCORR_OK || n != 1 || h != 9 || w != 9) return 1;
    float L[49], R[9], out[81];
    for (int i = 0; i < 49; ++i) L[i] = (float)((i * 7) % 11) - 5.0f;
    for (int i = 0; i < 9; ++i) R[i] = (float)((i * 5) % 7) - 3.0f;
    float *dl = NULL, *dr = NULL, *dout = NULL;
    if (cudaMalloc((void**)&dl, sizeof L) || cudaMalloc((void**)&dr, sizeof R) || cudaMalloc((void**)&dout, sizeof out)) return 1;
    if (cudaMemcpy(dl, L, sizeof L, cudaMemcpyHostToDevice) || cudaMemcpy(dr, R, sizeof R, cudaMemcpyHostToDevice)) return 1;
    /* Pageable host memory: refused before any kernel reads it, where the GPU cannot (it faulted the
       context); where it can (HMM, ATS), computed like device memory. The device pointers after it
       still run: nothing was poisoned. */
    {
        int dev = 0, pageable = 0;
        if (cudaGetDevice(&dev) || cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, dev)) return 1;
        float* host_out = (float*)malloc(sizeof out);
        if (!host_out) return 1;
        st = xcorr_plan_execute(plan, dl, dr, host_out, NULL);
        if (pageable ? st != XCORR_OK : (st != XCORR_ERROR_USAGE || !strstr(xcorr_last_error(), "pageable"))) {
            fprintf(stderr, "host out (pageable access %d): status %d: %s\n", pageable, (int)st, xcorr_last_error());
            return 1;
        }
        if (pageable && cudaDeviceSynchronize()) return 1;
        free(host_out);
        printf("pageable out: %s\n", pageable ? "read by this GPU" : "refused");
    }
    if (xcorr_plan_execute(plan, dl, dr, dout, NULL) != XCORR_OK) {
        fprintf(stderr, "execute: %s\n", xcorr_last_error());
        return 1;
    }
    if (cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost)) return 1;
    for (int y = 0; y < 9; ++y)
        for (int x = 0; x < 9; ++x) {
            const int dy = y - 2, dx = x - 2;
            double ref = 0;
            for (int r = 0; r < 3; ++r)
                for (int c = 0; c < 3; ++c)
                    if (r + dy >= 0 && r + dy < 7 && c + dx >= 0 && c + dx < 7) ref += L[(r + dy) * 7 + c + dx] * R[r * 3 + c];
            if (fabs(out[y * 9 + x] - ref) > 1e-3) {
                fprintf(stderr, "out[%d][%d] = %g, expected %g\n", y, x, out[y * 9 + x], ref);
                return 1;
            }
        }
    xcorr_plan_destroy(plan);
    /* A reduced plan: its two peaks without suppression are the two largest values of the map
     * checked above (ties to the smaller row-major shift), at their shifts; its map entry point
     * refuses it. */
    {
        xcorr_spec r = s;
        r.reduce = "peaks";
        r.k = 2;
        r.subpixel = "none";
        xcorr_plan* rp = NULL;
        if (xcorr_plan_create(&r, &rp) != XCORR_OK) {
            fprintf(stderr, "peaks plan: %s\n", xcorr_last_error());
            return 1;
        }
        int64_t count = 0, elems = 0;
        if (xcorr_plan_reduced_shape(rp, &count, &elems) != XCORR_OK || count != 1 || elems != 2) return 1;
        float *dv = NULL, *dsp = NULL;
        int32_t* dsh = NULL;
        if (cudaMalloc((void**)&dv, 2 * sizeof(float)) || cudaMalloc((void**)&dsh, 4 * sizeof(int32_t)) ||
            cudaMalloc((void**)&dsp, 4 * sizeof(float)))
            return 1;
        if (xcorr_plan_execute_peaks(rp, dl, dr, dv, dsh, dsp, NULL) != XCORR_OK) {
            fprintf(stderr, "execute_peaks: %s\n", xcorr_last_error());
            return 1;
        }
        float v[2], sp[4];
        int32_t sh[4];
        if (cudaMemcpy(v, dv, sizeof v, cudaMemcpyDeviceToHost) || cudaMemcpy(sh, dsh, sizeof sh, cudaMemcpyDeviceToHost) ||
            cudaMemcpy(sp, dsp, sizeof sp, cudaMemcpyDeviceToHost))
            return 1;
        /* Each peak is the map's value at its shift; the first is the largest value, the second the
         * largest elsewhere (within the map's float error: equal values may come in either order
         * when an FFT computes the map). */
        int at[2];
        for (int q = 0; q < 2; ++q) {
            const int y = sh[2 * q] + 2, x = sh[2 * q + 1] + 2;
            if (y < 0 || y >= 9 || x < 0 || x >= 9 || fabs(v[q] - out[y * 9 + x]) > 1e-3 ||
                sp[2 * q] != (float)sh[2 * q] || sp[2 * q + 1] != (float)sh[2 * q + 1]) {
                fprintf(stderr, "peak %d: %g at (%d, %d) is not the map's value there\n", q, v[q], sh[2 * q], sh[2 * q + 1]);
                return 1;
            }
            at[q] = y * 9 + x;
        }
        for (int i = 0; i < 81; ++i)
            if (out[i] > v[0] + 1e-3 || (i != at[0] && out[i] > v[1] + 1e-3) || at[0] == at[1]) {
                fprintf(stderr, "peaks %g, %g: the map holds %g at element %d\n", v[0], v[1], out[i], i);
                return 1;
            }
        if (xcorr_plan_execute(rp, dl, dr, dout, NULL) != XCORR_ERROR_USAGE || !strstr(xcorr_last_error(), "reduces")) {
            fprintf(stderr, "a reduced plan's map entry point: expected a usage error, got: %s\n", xcorr_last_error());
            return 1;
        }
        printf("peaks: %g at (%d, %d), %g at (%d, %d)\n", v[0], sh[0], sh[1], v[1], sh[2], sh[3]);
        cudaFree(dv);
        cudaFree(dsh);
        cudaFree(dsp);
        xcorr_plan_destroy(rp);
    }
    /* fft holds its workspace and cuFFT work areas: counted up front. */
    xcorr_spec f = s;
    f.algorithm = "fft";
    xcorr_plan* fp = NULL;
    st = xcorr_plan_create(&f, &fp);
    if (st == XCORR_OK) {
        size_t bytes = 0;
        if (xcorr_plan_workspace_bytes(fp, &bytes) != XCORR_OK || bytes == 0) return 1;
        printf("fft workspace %zu bytes\n", bytes);
        xcorr_plan_destroy(fp);
    } else if (st == XCORR_ERROR_USAGE && strstr(xcorr_last_error(), "unknown algorithm")) {
        printf("fft not in this build\n");
    } else {
        fprintf(stderr, "fft plan: %s\n", xcorr_last_error());
        return 1;
    }
    printf("ok: auto ran %s\n", "a plan");
    cudaFree(dl);
    cudaFree(dr);
    cudaFree(dout);
    return 0;
}
