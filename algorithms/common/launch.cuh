// Host-side launch helpers shared by the variants: programmatic dependent launch, the checks that
// the GPU (and this binary) has what a kernel needs, and the fan-out of launches over streams.
// Their device-side counterparts are beside it in algorithms/common/ (pdl.cuh, mma_tf32.cuh, wgmma.cuh).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "xcorr/core.hpp"
#include "xcorr/cuda_check.hpp"

namespace xcorr {

// kernel<<<grid, block, smem, stream>>>(args...) as a programmatic dependent launch (sm_90 and
// later; common/pdl.cuh explains the kernel side). XCORR_NO_PDL=1 in the environment launches it
// as an ordinary kernel instead (a diagnostic: the kernel side's wait is then a no-op).
template <class... Params, class... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                      Args&&... args) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    static const bool no_pdl = env_on("XCORR_NO_PDL");
    cfg.attrs = &attr;
    cfg.numAttrs = no_pdl ? 0 : 1;
    XC_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
    XC_CHECK_LAUNCH();
}

// Host side: a UsageError naming the variant unless the current GPU has TF32 mma.sync (sm_80+).
inline void require_mma_tf32(const std::string& variant) {
    int dev = 0, major = 0;
    XC_CUDA_CHECK(cudaGetDevice(&dev));
    XC_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    if (major < 8)
        throw UsageError(variant + ": mma.sync TF32 needs compute capability 8.0 or newer (this GPU: " +
                         std::to_string(major) + ".x)");
}

// Host side: the most dynamic shared memory a block may opt in to on the current GPU (sm_75: 64 KB;
// sm_86/sm_89: 99 KB; sm_80/sm_90: 163/227 KB).
inline size_t dynamic_smem_optin() {
    int dev = 0, optin = 0;
    XC_CUDA_CHECK(cudaGetDevice(&dev));
    XC_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    return size_t(optin);
}

// Host side: lets `kernel` take `bytes` of dynamic shared memory a block, or, where the current GPU
// allows less (dynamic_smem_optin), a UsageError naming the variant: a refusal that auto passes
// over to its next candidate, where cudaFuncSetAttribute's own failure would be a CudaError. The
// limit is only ever raised (raise_dynamic_smem_limit).
template <typename K>
void allow_dynamic_smem(K kernel, size_t bytes, const std::string& variant) {
    const size_t optin = dynamic_smem_optin();
    if (bytes > optin)
        throw UsageError(variant + ": needs " + std::to_string((bytes + 1023) / 1024) +
                         " KB of shared memory a block for this problem; this GPU allows " +
                         std::to_string(optin / 1024) + " KB");
    raise_dynamic_smem_limit(kernel, bytes);
}

// Host side: why this process cannot run sm_90a code (wgmma, setmaxnreg) on the current GPU, or ""
// where it can: the GPU is compute capability 9.0 and this binary holds 9.0 code (built as sm_90a,
// meson.build); those instructions exist on no other GPU.
inline std::string sm90a_missing() {
    int dev = 0, major = 0, minor = 0;
    XC_CUDA_CHECK(cudaGetDevice(&dev));
    XC_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    XC_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    if (major != 9 || minor != 0)
        return "sm_90a code needs a compute capability 9.0 GPU (this GPU: " + std::to_string(major) + "." +
               std::to_string(minor) + ")";
    const std::string archs = std::string(";") + XCORR_CUDA_ARCHS + ";";
    if (archs.find(";90;") == std::string::npos)
        return "this binary holds no compute capability 9.0 code (sm_90a); rebuild with -Dgpu_arch=9.0";
    return "";
}

// A UsageError naming the variant where wgmma cannot run (sm90a_missing).
inline void require_wgmma(const std::string& variant) {
    const std::string why = sm90a_missing();
    if (!why.empty()) throw UsageError(variant + " (wgmma): " + why);
}

// Launches fanned out round-robin over K streams that the object owns, forked from the caller's
// stream and joined back to it with events, so the caller's timing covers all of them (the
// streamsK `launch` of the multi-matrix-right variants, algorithms/common/multi_matrix_launch.cuh).
class StreamFan {
public:
    explicit StreamFan(int k) {
        try {
            XC_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
            for (int i = 0; i < k; ++i) {
                cudaStream_t s;
                XC_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
                streams_.push_back(s);
                cudaEvent_t e;
                XC_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
                joins_.push_back(e);
            }
        } catch (...) {
            release();
            throw;
        }
    }
    ~StreamFan() { release(); }
    StreamFan(const StreamFan&) = delete;
    StreamFan& operator=(const StreamFan&) = delete;

    // launch(i, stream) for i in [0, n), round-robin over the streams, all after the work already
    // on `caller` and all before the work enqueued on `caller` afterwards.
    template <typename F>
    void run(cudaStream_t caller, int n, F&& launch) {
        const int used = std::min<int>(n, int(streams_.size()));
        if (used <= 0) return;
        XC_CUDA_CHECK(cudaEventRecord(fork_, caller));
        for (int s = 0; s < used; ++s) XC_CUDA_CHECK(cudaStreamWaitEvent(streams_[s], fork_, 0));
        for (int i = 0; i < n; ++i) launch(i, streams_[i % used]);
        for (int s = 0; s < used; ++s) {
            XC_CUDA_CHECK(cudaEventRecord(joins_[s], streams_[s]));
            XC_CUDA_CHECK(cudaStreamWaitEvent(caller, joins_[s], 0));
        }
    }

private:
    void release() {
        for (auto e : joins_) cudaEventDestroy(e);
        for (auto s : streams_) cudaStreamDestroy(s);
        if (fork_) cudaEventDestroy(fork_);
        joins_.clear(), streams_.clear(), fork_ = nullptr;
    }
    std::vector<cudaStream_t> streams_;
    std::vector<cudaEvent_t> joins_;
    cudaEvent_t fork_ = nullptr;
};

// A call's launches replayed as one CUDA graph when the call repeats. The smallest calls are bound
// by launching, not by their kernels: a graph of fft-fused's four dependent launches at 128 x 128
// takes about a fifth less per call than the launches (the numbers: notes/51_fft_fused.md);
// one cudaGraphLaunch replaces the launches on the host, and the graph's kernel nodes start
// sooner after one another on the GPU. The first call with a set of pointers launches directly
// and remembers them; a second call with the same ones captures the launches (on a private
// stream: the caller's may be the legacy default stream, which cannot be captured) and launches
// the graph, and later calls replay it. So a caller whose pointers change every call never pays
// for a capture, and a graph never runs with pointers other than those it was captured with (the
// launches may depend on nothing else: the instance's own workspace and parameters are fixed).
// A stream that the caller is capturing gets direct launches (they become part of the caller's
// graph). XCORR_NO_GRAPH=1 in the environment: always direct launches (a diagnostic, and A/B
// runs of one binary).
class GraphReplay {
public:
    using Key = std::array<const void*, 3>;
    GraphReplay() = default;
    ~GraphReplay() { release(); }
    GraphReplay(const GraphReplay&) = delete;
    GraphReplay& operator=(const GraphReplay&) = delete;

    // enqueue(s) issues the call's launches on stream s, the same launches every time for one key.
    template <typename F>
    void run(const Key& key, cudaStream_t stream, F&& enqueue) {
        static const bool off = env_on("XCORR_NO_GRAPH");
        cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
        if (!off) XC_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
        if (off || capture != cudaStreamCaptureStatusNone) return enqueue(stream);
        if (exec_ && key == graph_key_) {
            XC_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
            return;
        }
        if (!(seen_ && key == last_key_)) {  // new pointers: launch directly, remember them
            seen_ = true;
            last_key_ = key;
            return enqueue(stream);
        }
        capture_graph(key, enqueue);
        XC_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
    }

    // The launches change (an instance's parameters were set anew): the next call launches directly.
    void forget() {
        release();
        seen_ = false;
    }

private:
    template <typename F>
    void capture_graph(const Key& key, F& enqueue) {
        if (!cs_) XC_CUDA_CHECK(cudaStreamCreateWithFlags(&cs_, cudaStreamNonBlocking));
        cudaGraph_t g = nullptr;
        XC_CUDA_CHECK(cudaStreamBeginCapture(cs_, cudaStreamCaptureModeThreadLocal));
        try {
            enqueue(cs_);
        } catch (...) {
            cudaStreamEndCapture(cs_, &g);  // leave the stream usable; the launch's error stands
            if (g) cudaGraphDestroy(g);
            cudaGetLastError();
            throw;
        }
        XC_CUDA_CHECK(cudaStreamEndCapture(cs_, &g));
        bool updated = false;
        if (exec_) {
            cudaGraphExecUpdateResultInfo info{};
            updated = cudaGraphExecUpdate(exec_, g, &info) == cudaSuccess;
            if (!updated) {  // another topology: a new executable graph
                cudaGetLastError();
                cudaGraphExecDestroy(exec_);
                exec_ = nullptr;
            }
        }
        cudaError_t err = cudaSuccess;
        if (!updated) err = cudaGraphInstantiate(&exec_, g, 0);
        cudaGraphDestroy(g);
        if (err != cudaSuccess) {
            exec_ = nullptr;
            XC_CUDA_CHECK(err);
        }
        graph_key_ = key;
    }
    void release() {
        if (exec_) cudaGraphExecDestroy(exec_);
        if (cs_) cudaStreamDestroy(cs_);
        exec_ = nullptr, cs_ = nullptr;
    }
    Key last_key_{}, graph_key_{};
    bool seen_ = false;
    cudaGraphExec_t exec_ = nullptr;
    cudaStream_t cs_ = nullptr;
};

}  // namespace xcorr
