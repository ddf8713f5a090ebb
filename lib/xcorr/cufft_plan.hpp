// Making cuFFT plans, for the variants that use cuFFT (fft, fft+plan, fft-segmented): one place for
// how a plan that does not fit the GPU's memory is told apart from other failures, so that the
// variants can retry in smaller chunks instead of failing the batch.
#pragma once

#include <cufft.h>

#include <cstdint>
#include <stdexcept>

namespace xcorr {

// A plan cuFFT could not make for want of GPU memory: CUFFT_ALLOC_FAILED, or CUFFT_INTERNAL_ERROR,
// which cuFFT also returns for a plan whose work area exceeds the free memory (300 transforms of an
// 8.64 M-sample trace on an 80 GB H100; the 141 GB H200 makes it). A variant that can work in
// smaller chunks catches it and plans again; elsewhere plan_error turns it into the plain error.
struct PlanTooLarge : std::runtime_error {
    explicit PlanTooLarge(int r) : std::runtime_error("cuFFT plan too large for the free GPU memory"), result(r) {}
    int result;  // the cufftResult
};

// The error a PlanTooLarge stands for, as XC_CUFFT_CHECK reports it (out of memory: a UsageError).
[[noreturn]] void plan_error(const PlanTooLarge& e);

// XCORR_FFT_PLAN_BATCH_LIMIT=B (tests): plans of more than B transforms fail as PlanTooLarge with
// CUFFT_ALLOC_FAILED, the way a GPU with too little memory for them fails, so that the retries run
// on any GPU. 0 (unset): no limit. Read once per process.
int64_t plan_batch_limit();

// cufftCreate + cufftMakePlanMany64 with cuFFT's own work area (the arguments as cuFFT's, for
// `rank` dimensions n[0..rank)); throws PlanTooLarge (above) or the cuFFT error, the handle
// destroyed either way.
cufftHandle make_plan_many(int rank, long long* n, long long* inembed, long long idist, long long* onembed,
                           long long odist, cufftType type, long long batch);

}  // namespace xcorr
