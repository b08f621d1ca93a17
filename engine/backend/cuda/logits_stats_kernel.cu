// Fused logits statistics: one block per wanted logits row.
//
// Pass 1 reads the row once (16-byte loads) and streams every value through kernel_math's
// EntropyAdd / Top2Add (and, for unfiltered sampling, the Gumbel-max score of counter_rng's
// uniform for that id); per-thread states are merged with EntropyMerge / Top2Merge in a fixed
// shuffle tree, so the result depends only on the row. Only DeviceRowStats leave the kernel.
//
// Sampling with top-p / top-k (the CPU backend's rule: order (value desc, id asc) on
// z = logit / T, top-p keeps 1 + the leading tokens whose inclusive cumulative probability is
// <= top_p, then top-k) needs the kept prefix of that order without sorting: a radix search
// over ordered 32-bit keys of z (cuda_index_math.h), 8 bits per pass, with count and
// fixed-point mass histograms (integer atomics, so deterministic), then a radix select of
// the id cutoff inside the tie group at the threshold, then one Gumbel-max pass over the kept
// tokens. These extra passes re-read the row (from L2) only for rows that filter. Cumulative
// masses are summed in a different order than the CPU's sequential sum, so a token whose
// cumulative probability is within rounding of top_p may be kept on one backend and not the
// other.
//
// top_logprobs = n > 0 lists the row's first n tokens in (value desc, id asc) order, the
// order RanksBefore defines, by n further passes: pass r keeps, per thread, the best token
// ranking after pass r - 1's pick, and a block reduction picks the best of those. n re-reads
// of the row, for rows that ask only.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/counter_rng.h"
#include "engine/backend/cuda/bf16_vec.cuh"
#include "engine/backend/cuda/cuda_index_math.h"
#include "engine/backend/cuda/cuda_kernels.h"
#include "engine/backend/kernel_math.h"

namespace dllm {
namespace cuda {
namespace {

constexpr int kStatsThreads = 512;
constexpr unsigned kFull = 0xffffffffu;

struct GumbelBest {
  float score = -INFINITY;
  int32_t id = -1;
};

__device__ __forceinline__ void GumbelConsider(GumbelBest* best, float score, int32_t id) {
  if (best->id < 0 || kmath::RanksBefore(score, id, best->score, best->id)) {
    best->score = score;
    best->id = id;
  }
}

__device__ __forceinline__ void GumbelMerge(GumbelBest* a, const GumbelBest& b) {
  if (b.id >= 0) GumbelConsider(a, b.score, b.id);
}

__device__ __forceinline__ kmath::EntropyState ShflDown(const kmath::EntropyState& s, int off) {
  kmath::EntropyState o;
  o.max = __shfl_down_sync(kFull, s.max, off);
  o.sum = __shfl_down_sync(kFull, s.sum, off);
  o.weighted = __shfl_down_sync(kFull, s.weighted, off);
  return o;
}

__device__ __forceinline__ kmath::Top2 ShflDown(const kmath::Top2& t, int off) {
  kmath::Top2 o;
  o.value1 = __shfl_down_sync(kFull, t.value1, off);
  o.id1 = __shfl_down_sync(kFull, t.id1, off);
  o.value2 = __shfl_down_sync(kFull, t.value2, off);
  o.id2 = __shfl_down_sync(kFull, t.id2, off);
  return o;
}

__device__ __forceinline__ GumbelBest ShflDown(const GumbelBest& g, int off) {
  GumbelBest o;
  o.score = __shfl_down_sync(kFull, g.score, off);
  o.id = __shfl_down_sync(kFull, g.id, off);
  return o;
}

__device__ __forceinline__ void MergeInto(kmath::EntropyState* a, const kmath::EntropyState& b) {
  kmath::EntropyMerge(a, b);
}
__device__ __forceinline__ void MergeInto(kmath::Top2* a, const kmath::Top2& b) {
  kmath::Top2Merge(a, b);
}
__device__ __forceinline__ void MergeInto(GumbelBest* a, const GumbelBest& b) { GumbelMerge(a, b); }

// Fixed-tree block reduction; every thread gets the result. `scratch` holds 32 values.
// Lanes whose shuffle source is out of range merge garbage, but lane 0's chain only ever
// reads in-range lanes.
template <typename T>
__device__ T BlockReduce(T value, T* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) MergeInto(&value, ShflDown(value, off));
  __syncthreads();
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < warps ? scratch[lane] : T();
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) MergeInto(&value, ShflDown(value, off));
    if (lane == 0) scratch[0] = value;
  }
  __syncthreads();
  const T result = scratch[0];
  __syncthreads();
  return result;
}

// Calls f(id, value) for this thread's share of the row: 16-byte vectors when the row allows.
template <typename F>
__device__ __forceinline__ void ForEachLogit(const uint16_t* row, int vocab, F&& f) {
  if (cuda_index::RowsVectorizable(vocab)) {
    for (int i = threadIdx.x; i < vocab / 8; i += blockDim.x) {
      const Vec8 a = LoadVec8(row + 8 * i);
#pragma unroll
      for (int e = 0; e < 8; ++e) f(8 * i + e, a.v[e]);
    }
  } else {
    for (int i = threadIdx.x; i < vocab; i += blockDim.x) f(i, Bf16BitsToFloat(row[i]));
  }
}

__device__ __forceinline__ void ClearHistogram(uint32_t* count, unsigned long long* mass) {
  for (int i = threadIdx.x; i < cuda_index::kRadixBins; i += blockDim.x) {
    count[i] = 0;
    mass[i] = 0;
  }
}

__global__ void __launch_bounds__(kStatsThreads)
    LogitsStatsKernel(const uint16_t* __restrict__ logits, int vocab,
                      const RowRequestDesc* __restrict__ requests,
                      DeviceRowStats* __restrict__ out) {
  __shared__ kmath::EntropyState entropy_scratch[32];
  __shared__ kmath::Top2 top2_scratch[32];
  __shared__ GumbelBest gumbel_scratch[32];
  __shared__ float float_scratch[32];
  __shared__ uint32_t hist_count[cuda_index::kRadixBins];
  __shared__ unsigned long long hist_mass[cuda_index::kRadixBins];
  __shared__ cuda_index::TopPState top_p_state;
  __shared__ cuda_index::TopKState top_k_state;
  __shared__ cuda_index::IdSelectState id_state;

  const uint16_t* x = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  const RowRequestDesc rq = requests[blockIdx.x];
  const uint64_t seed =
      static_cast<uint64_t>(rq.seed_lo) | (static_cast<uint64_t>(rq.seed_hi) << 32);
  const float temperature = rq.temperature;
  const bool sample = temperature > 0.0f;
  const bool top_k_on = rq.top_k > 0 && rq.top_k < vocab;
  const bool top_p_on = rq.top_p < 1.0f;
  const bool filtered = sample && (top_k_on || top_p_on);
  const bool gumbel_all = sample && !filtered;

  // ---- Pass 1: entropy, top-2, unfiltered Gumbel-max. ----
  kmath::EntropyState entropy;
  kmath::Top2 top2;
  GumbelBest best;
  ForEachLogit(x, vocab, [&](int id, float v) {
    kmath::EntropyAdd(&entropy, v);
    kmath::Top2Add(&top2, v, id);
    if (gumbel_all) {
      const float u = cuda_index::UniformForId(seed, rq.position, rq.step, id);
      GumbelConsider(&best, kmath::GumbelScore(v, temperature, u), id);
    }
  });
  entropy = BlockReduce(entropy, entropy_scratch);
  top2 = BlockReduce(top2, top2_scratch);
  if (gumbel_all) best = BlockReduce(best, gumbel_scratch);

  // ---- Filtered sampling. ----
  if (filtered) {
    auto z_of = [temperature](float v) { return v != v ? -INFINITY : v / temperature; };
    int64_t kept = vocab;
    if (top_p_on) {
      float z_max = -INFINITY;
      ForEachLogit(x, vocab, [&](int, float v) { z_max = fmaxf(z_max, z_of(v)); });
      z_max = BlockMax(z_max, float_scratch);
      float z_sum = 0.0f;
      ForEachLogit(x, vocab,
                   [&](int, float v) { z_sum = kmath::AddRn(z_sum, expf(z_of(v) - z_max)); });
      z_sum = BlockSum(z_sum, float_scratch);
      const uint64_t threshold = cuda_index::MassToFixed(rq.top_p);
      if (threadIdx.x == 0) top_p_state = cuda_index::TopPState();
      for (int level = 0; level < cuda_index::kRadixLevels; ++level) {
        ClearHistogram(hist_count, hist_mass);
        __syncthreads();
        const uint32_t prefix = top_p_state.prefix, mask = top_p_state.mask;
        ForEachLogit(x, vocab, [&](int, float v) {
          const float z = z_of(v);
          const uint32_t key = cuda_index::OrderedKey(z);
          if (!cuda_index::RadixInRange(key, prefix, mask)) return;
          const uint32_t bin = cuda_index::RadixBin(key, level);
          atomicAdd(&hist_count[bin], 1u);
          const uint64_t m = cuda_index::MassToFixed(expf(z - z_max) / z_sum);
          if (m != 0) atomicAdd(&hist_mass[bin], static_cast<unsigned long long>(m));
        });
        __syncthreads();
        if (threadIdx.x == 0) {
          cuda_index::TopPRadixStep(hist_count, reinterpret_cast<const uint64_t*>(hist_mass),
                                    threshold, level, &top_p_state);
        }
        __syncthreads();
        if (top_p_state.done) break;
      }
      kept = cuda_index::TopPKeptCount(top_p_state.within, vocab);
    }
    if (top_k_on && rq.top_k < kept) kept = rq.top_k;

    bool keep_all = kept >= vocab;
    uint32_t threshold_key = 0;
    uint32_t id_cut = 0x7fffffffu;
    if (!keep_all) {
      if (threadIdx.x == 0) top_k_state = cuda_index::TopKState();
      for (int level = 0; level < cuda_index::kRadixLevels; ++level) {
        ClearHistogram(hist_count, hist_mass);
        __syncthreads();
        const uint32_t prefix = top_k_state.prefix, mask = top_k_state.mask;
        ForEachLogit(x, vocab, [&](int, float v) {
          const uint32_t key = cuda_index::OrderedKey(z_of(v));
          if (cuda_index::RadixInRange(key, prefix, mask)) {
            atomicAdd(&hist_count[cuda_index::RadixBin(key, level)], 1u);
          }
        });
        __syncthreads();
        if (threadIdx.x == 0) {
          cuda_index::TopKRadixStep(hist_count, static_cast<uint32_t>(kept), level, &top_k_state);
        }
        __syncthreads();
        if (top_k_state.done) break;
      }
      threshold_key = top_k_state.prefix;
      const uint32_t group = top_k_state.group;
      const uint32_t need = static_cast<uint32_t>(kept) - top_k_state.count_above;
      if (group == 0) {
        keep_all = true;
      } else if (need < group) {
        if (threadIdx.x == 0) id_state = cuda_index::IdSelectState();
        for (int level = 0; level < cuda_index::kRadixLevels; ++level) {
          ClearHistogram(hist_count, hist_mass);
          __syncthreads();
          const uint32_t prefix = id_state.prefix, mask = id_state.mask;
          ForEachLogit(x, vocab, [&](int id, float v) {
            if (cuda_index::OrderedKey(z_of(v)) != threshold_key) return;
            const uint32_t id_key = static_cast<uint32_t>(id);
            if (cuda_index::RadixInRange(id_key, prefix, mask)) {
              atomicAdd(&hist_count[cuda_index::RadixBin(id_key, level)], 1u);
            }
          });
          __syncthreads();
          if (threadIdx.x == 0) cuda_index::IdRadixStep(hist_count, need, level, &id_state);
          __syncthreads();
          if (id_state.done) break;
        }
        id_cut = id_state.prefix;
      }
    }

    best = GumbelBest();
    ForEachLogit(x, vocab, [&](int id, float v) {
      if (!keep_all && !cuda_index::KeptByThreshold(cuda_index::OrderedKey(z_of(v)), id,
                                                    threshold_key, id_cut)) {
        return;
      }
      const float u = cuda_index::UniformForId(seed, rq.position, rq.step, id);
      GumbelConsider(&best, kmath::GumbelScore(v, temperature, u), id);
    });
    best = BlockReduce(best, gumbel_scratch);
  }

  // ---- Top tokens for logprobs: one pass per listed token. ----
  const int top_n = rq.top_logprobs;
  GumbelBest previous;
  int listed = 0;
  for (int r = 0; r < top_n; ++r) {
    GumbelBest pick;
    ForEachLogit(x, vocab, [&](int id, float v) {
      if (r > 0 && !kmath::RanksBefore(previous.score, previous.id, v, id)) return;
      GumbelConsider(&pick, v, id);
    });
    pick = BlockReduce(pick, gumbel_scratch);
    if (pick.id < 0) break;  // fewer tokens than asked (vocab < n is clamped on the host)
    if (threadIdx.x == 0) {
      out[blockIdx.x].top_tokens[r] = pick.id;
      out[blockIdx.x].top_logprobs[r] = kmath::EntropyStateLogProb(entropy, pick.score);
    }
    previous = pick;
    listed = r + 1;
  }

  if (threadIdx.x == 0) {
    DeviceRowStats s;
    s.position = rq.position;
    s.argmax_token = top2.id1;
    s.argmax_prob = kmath::EntropyStateProb(entropy, top2.value1);
    s.entropy_nats = kmath::EntropyNats(entropy);
    const float p2 = top2.id2 >= 0 ? kmath::EntropyStateProb(entropy, top2.value2) : 0.0f;
    s.margin = s.argmax_prob - p2;
    if (!sample || best.id < 0) {
      s.token = s.argmax_token;
      s.token_prob = s.argmax_prob;
    } else {
      s.token = best.id;
      s.token_prob = kmath::EntropyStateProb(entropy, Bf16BitsToFloat(x[best.id]));
    }
    s.token_logprob = kmath::EntropyStateLogProb(entropy, Bf16BitsToFloat(x[s.token]));
    // The top lists were written above; copy only the scalars over them.
    DeviceRowStats& o = out[blockIdx.x];
    o.position = s.position;
    o.argmax_token = s.argmax_token;
    o.argmax_prob = s.argmax_prob;
    o.entropy_nats = s.entropy_nats;
    o.margin = s.margin;
    o.token = s.token;
    o.token_prob = s.token_prob;
    o.token_logprob = s.token_logprob;
    o.top_count = listed;
  }
}

}  // namespace

cudaError_t LaunchLogitsStats(const uint16_t* logits, int vocab, const RowRequestDesc* requests,
                              int rows, DeviceRowStats* out, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  LogitsStatsKernel<<<rows, kStatsThreads, 0, stream>>>(logits, vocab, requests, out);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace dllm
