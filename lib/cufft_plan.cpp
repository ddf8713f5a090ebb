#include "xcorr/cufft_plan.hpp"

#include "xcorr/core.hpp"
#include "xcorr/cuda_check.hpp"

namespace xcorr {

void plan_error(const PlanTooLarge& e) { throw_cufft_error(e.result, "cufftMakePlanMany64", __FILE__, __LINE__); }

int64_t plan_batch_limit() {
    static const int64_t limit = env_integer("XCORR_FFT_PLAN_BATCH_LIMIT", 0);
    return limit;
}

cufftHandle make_plan_many(int rank, long long* n, long long* inembed, long long idist, long long* onembed,
                           long long odist, cufftType type, long long batch) {
    if (const int64_t limit = plan_batch_limit(); limit && batch > limit) throw PlanTooLarge(CUFFT_ALLOC_FAILED);
    cufftHandle h;
    XC_CUFFT_CHECK(cufftCreate(&h));
    size_t work = 0;
    const cufftResult r = cufftMakePlanMany64(h, rank, n, inembed, 1, idist, onembed, 1, odist, type, batch, &work);
    if (r != CUFFT_SUCCESS) {
        cufftDestroy(h);
        if (r == CUFFT_ALLOC_FAILED || r == CUFFT_INTERNAL_ERROR) throw PlanTooLarge(int(r));
        throw_cufft_error(int(r), "cufftMakePlanMany64", __FILE__, __LINE__);
    }
    return h;
}

}  // namespace xcorr
