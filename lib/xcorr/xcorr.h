/* The plain C API of the xcorr library (for other languages), over the C++ plan of xcorr/plan.hpp.
 *
 *   xcorr_spec s;
 *   xcorr_spec_init(&s);                       // one-to-one, full window, fp32, "auto"
 *   s.form = XCORR_ONE_TO_MANY; s.n_right = 32;
 *   s.h_left = s.w_left = 256; s.h_right = s.w_right = 64;
 *   s.mode = "valid";
 *   xcorr_plan* plan = NULL;
 *   if (xcorr_plan_create(&s, &plan) != XCORR_OK) fprintf(stderr, "%s\n", xcorr_last_error());
 *   xcorr_plan_execute(plan, d_left, d_right, d_out, (void*)stream);   // device pointers
 *   xcorr_plan_destroy(plan);
 *
 * Every function returns an xcorr_status; on failure xcorr_last_error() holds the message (per
 * thread, until the next failing call of that thread). No C++ exception crosses this API.
 * Layouts, forms and windows: docs/CONVENTIONS.md, as for the C++ API.
 */
#ifndef XCORR_XCORR_H
#define XCORR_XCORR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum xcorr_status {
    XCORR_OK = 0,
    XCORR_ERROR_USAGE = 2,   /* bad spec or input, unsupported problem, too large for the GPU, or an
                                environment switch out of its range (docs/cli.md, "Environment switches") */
    XCORR_ERROR_NO_GPU = 3,  /* no usable CUDA GPU, or one this build has no code for */
    XCORR_ERROR_CUDA = 4,    /* any other CUDA or cuFFT failure */
    XCORR_ERROR_INTERNAL = 5 /* anything else (a bug) */
} xcorr_status;

typedef enum xcorr_form {
    XCORR_ONE_TO_ONE = 0,
    XCORR_ONE_TO_MANY = 1,
    XCORR_N_TO_MN = 2,
    XCORR_N_TO_M = 3
} xcorr_form;

/* What a plan computes. Strings may be NULL for their defaults. At most one of mode, max_shift
 * and shifts may be set (NULL: the full output). */
typedef struct xcorr_spec {
    int form;                 /* xcorr_form */
    int n_left, n_right;      /* matrices in each stack */
    int h_left, w_left, h_right, w_right;
    const char* mode;         /* "full", "valid", "same" */
    const char* max_shift;    /* "SY[,SX]" */
    const char* shifts;       /* "DY0:DY1,DX0:DX1" */
    const char* normalize;    /* "none", "zncc" or "zero-lag" (CONVENTIONS.md, "Normalization"); NULL: "none" */
    const char* precision;    /* "fp32" (default) or "tf32" */
    const char* algorithm;    /* a variant name or "auto" (default) */
    const char* params;       /* "key=value,key=value" for a named algorithm, or NULL */
    /* A reduction instead of the maps (CONVENTIONS.md, "Reductions"; xcorr/reduce.hpp): NULL or "map",
     * "peaks" (k, min_distance, subpixel) or "max-over-rights" (stats). */
    const char* reduce;
    int k;                    /* peaks per map, >= 1 (default 1) */
    int min_distance;         /* Chebyshev suppression radius in shifts, >= 0 (default 0) */
    const char* subpixel;     /* "parabolic" (default), "gaussian" or "none" */
    int stats;                /* max-over-rights: also the sum and the sum of squares (0 or 1) */
} xcorr_spec;

typedef struct xcorr_plan xcorr_plan;

/* The defaults: one-to-one 1 x 1 stacks, sizes 0 (to be set), full window, fp32, auto. */
void xcorr_spec_init(xcorr_spec* spec);

/* Builds a plan on the calling thread's current CUDA device; *plan is NULL on failure. */
xcorr_status xcorr_plan_create(const xcorr_spec* spec, xcorr_plan** plan);
/* Enqueues the computation on `stream` (a cudaStream_t; NULL: the default stream). The pointers are
 * device, managed or page-locked memory: pageable host memory the GPU cannot read is
 * XCORR_ERROR_USAGE (it would fault the kernel and the process's CUDA context). */
xcorr_status xcorr_plan_execute(xcorr_plan* plan, const float* left, const float* right, float* out, void* stream);
void xcorr_plan_destroy(xcorr_plan* plan); /* NULL is allowed */
/* A plan with reduce "peaks": per output matrix, value[k] (float, NaN where absent), shift[k][2]
 * (int32 dy, dx) and subpixel[k][2] (float), row-major over the plan's out_count matrices. */
xcorr_status xcorr_plan_execute_peaks(xcorr_plan* plan, const float* left, const float* right, float* value,
                                      int32_t* shift, float* subpixel, void* stream);
/* A plan with reduce "max-over-rights": per reduced left (xcorr_plan_reduced_shape) and shift, value
 * (float), index (int32, the right within the left's rights) and with stats sum and sumsq (double;
 * NULL without). accumulate != 0 continues the maxima already in the arrays, this call's rights
 * numbered from first_right: templates streamed in batches. */
xcorr_status xcorr_plan_execute_max(xcorr_plan* plan, const float* left, const float* right, float* value,
                                    int32_t* index, double* sum, double* sumsq, int accumulate, int64_t first_right,
                                    void* stream);
/* The reduced outputs' leading count (peaks: out_count; max-over-rights: the lefts reduced) and
 * elements per array (peaks: count * k for value, twice that for shift and subpixel;
 * max-over-rights: count * h * w for each). */
xcorr_status xcorr_plan_reduced_shape(const xcorr_plan* plan, int64_t* count, int64_t* elems);

/* Device memory the plan holds, in bytes. */
xcorr_status xcorr_plan_workspace_bytes(const xcorr_plan* plan, size_t* bytes);
/* The output: count matrices of h x w floats. */
xcorr_status xcorr_plan_out_shape(const xcorr_plan* plan, int64_t* count, int64_t* h, int64_t* w);
/* The algorithm that runs and why (valid while the plan lives). */
const char* xcorr_plan_algorithm(const xcorr_plan* plan);
const char* xcorr_plan_explain(const xcorr_plan* plan);

/* A batch from HOST memory into a host `out` (synchronous): the output matrices split into equal
 * runs over the CUDA devices devices[0 .. n_devices) (n_devices 0: the current device), each run
 * in pieces of at most max_outputs output matrices (0: about 64 MB of output, fewer where two pieces
 * in flight do not fit: halved on out-of-memory), one host thread per device, each device's pieces
 * pipelined (xcorr/batch.hpp). An `out` in page-locked memory (cudaMallocHost, cudaHostRegister)
 * is written by the devices directly, without a host copy. algorithm "reference" runs the same
 * pieces on the CPU in float64 (n_devices must be 0). */
xcorr_status xcorr_run_batch(const xcorr_spec* spec, const float* left, const float* right, float* out,
                             const int* devices, int n_devices, int64_t max_outputs);

/* Frees what xcorr_run_batch keeps between calls: per device it ran on, the last problem's plans,
 * device buffers and streams, and the pinned host staging (two pieces of ~64 MB of output, two
 * 32 MB upload buffers). Safe at any time; call it before cudaDeviceReset. */
void xcorr_release_batch_buffers(void);

/* The message of this thread's last failure ("" if none). */
const char* xcorr_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* XCORR_XCORR_H */
