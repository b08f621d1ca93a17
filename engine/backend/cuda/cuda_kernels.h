// Launchers of the CUDA backend's kernels (defined in the .cu files of this folder).
//
// Plain C++ declarations so that the host side of the backend (compiled by the C++ compiler)
// can call them. Every launcher enqueues work on `stream` and returns the launch error
// (cudaGetLastError), never blocking. bf16 data is passed as uint16_t (its bit pattern).
// Shapes are validated by the caller (cuda_backend.cc); the kernels still never write outside
// a slab when a position is out of range.
#ifndef DLLM_ENGINE_BACKEND_CUDA_CUDA_KERNELS_H_
#define DLLM_ENGINE_BACKEND_CUDA_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dllm {
namespace cuda {

// One sequence of a KvScatter/Attention call, as the kernels read it (uploaded per call).
struct SeqDesc {
  uint16_t* kv;  // slab base (bf16)
  int32_t capacity_positions;
  int32_t kv_positions;
  int32_t row_begin;
  int32_t rows;
  // Attention only; null: none. Not null: the attention kernel also writes each (head, row)'s
  // scaled scores and its softmax's final max and sum there (cuda_index::ScoresFloats,
  // ScoreIndex, ScoreStatsIndex): what LaunchAttentionProbsFinish turns into the
  // head-averaged probabilities without a second q·k pass (the fused attention probabilities).
  float* scores;
};
static_assert(sizeof(SeqDesc) == 32, "SeqDesc is uploaded as raw bytes");

// One block of query rows of one sequence.
struct AttnTile {
  int32_t seq;
  int32_t row0;  // first row of the tile, relative to the sequence's row_begin
};

struct AttnParams {
  int32_t num_heads;
  int32_t num_kv_heads;
  int32_t head_dim;
  int32_t layer;
  float scale;
};

// Per logits row: the sampling request (uploaded per call).
// kMaxTopLogprobs (engine/core/row_stats.h), restated for the .cu files; cuda_backend.cc checks
// that the two agree.
constexpr int kDeviceMaxTopLogprobs = 20;

struct RowRequestDesc {
  int32_t position;
  int32_t step;
  float temperature;
  int32_t top_k;
  float top_p;
  uint32_t seed_lo;
  uint32_t seed_hi;
  int32_t top_logprobs;  // SamplingParams::top_logprobs, clamped to [0, kDeviceMaxTopLogprobs]
};
static_assert(sizeof(RowRequestDesc) == 32, "RowRequestDesc is uploaded as raw bytes");

// Layout-identical to dllm::RowStats (checked in cuda_backend.cc).
struct DeviceRowStats {
  int32_t position;
  int32_t argmax_token;
  float argmax_prob;
  float entropy_nats;
  float margin;
  int32_t token;
  float token_prob;
  float token_logprob;
  int32_t top_count;
  int32_t top_tokens[kDeviceMaxTopLogprobs];
  float top_logprobs[kDeviceMaxTopLogprobs];
};

// Query rows per attention tile for a head dimension (the host builds tiles with it).
int AttentionTileRows(int head_dim);
// Head dimensions the attention kernels accept (any up to 256; 64 and 128 use tensor cores).
bool AttentionSupportsHeadDim(int head_dim);
// One-time kernel attribute setup (shared-memory limits). Call once per device.
cudaError_t InitKernelAttributes();

cudaError_t LaunchGatherRows(const uint16_t* src, int64_t src_rows, int cols,
                             const int32_t* row_indices, int rows, uint16_t* dst,
                             cudaStream_t stream);
// dst[row_indices[r]] = src[r] for r < rows (rows `cols` wide); indices outside
// [0, dst_rows) are skipped.
cudaError_t LaunchScatterRows(const uint16_t* src, int cols, const int32_t* row_indices, int rows,
                              int64_t dst_rows, uint16_t* dst, cudaStream_t stream);
cudaError_t LaunchRmsNorm(const uint16_t* x, int rows, int cols, const uint16_t* weight, float eps,
                          uint16_t* out, cudaStream_t stream);
cudaError_t LaunchRope(uint16_t* x, int rows, int heads, int head_dim, const int32_t* positions,
                       float theta, bool bf16_rounded, cudaStream_t stream);
cudaError_t LaunchKvScatter(const uint16_t* k, const uint16_t* v, const int32_t* positions,
                            const SeqDesc* seqs, int num_seqs, int max_rows, int kv_width,
                            int layer, cudaStream_t stream);
cudaError_t LaunchAttention(const uint16_t* q, const SeqDesc* seqs, const AttnTile* tiles,
                            int num_tiles, const AttnParams& params, uint16_t* out,
                            cudaStream_t stream);
// The fused probabilities of one sequence from its scores area (written by LaunchAttention):
// out[r * kv_positions + n] = sum over heads h, in order, of (1/heads) ·
// exp(score - max_h,r) / sum_h,r, fp32 on the device. Overwrites out.
cudaError_t LaunchAttentionProbsFinish(const float* scores, int num_heads, int rows,
                                       int kv_positions, float* out, cudaStream_t stream);
// Head-averaged attention probabilities of seq's rows (Backend::AttentionProbabilities):
// out[r * kv_positions + n], fp32 on the device, for r < seq.rows; `scratch` holds as many
// floats (the per-head scores). Overwrites out; needs AttentionProbsSupportsHeadDim.
bool AttentionProbsSupportsHeadDim(int head_dim);
cudaError_t LaunchAttentionProbs(const uint16_t* q, const SeqDesc& seq, const AttnParams& params,
                                 float* scratch, float* out, cudaStream_t stream);
cudaError_t LaunchSwiGlu(const uint16_t* gate, const uint16_t* up, int64_t elements, uint16_t* out,
                         cudaStream_t stream);
cudaError_t LaunchAdd(const uint16_t* x, int64_t elements, uint16_t* y, cudaStream_t stream);
cudaError_t LaunchLogitsStats(const uint16_t* logits, int vocab, const RowRequestDesc* requests,
                              int rows, DeviceRowStats* out, cudaStream_t stream);
// dst[i] = bf16(offset + scale * (2u - 1)), u uniform in (0, 1) from the counter RNG keyed by
// (seed, i): device-side random weights for benchmarks.
cudaError_t LaunchRandomBf16(uint16_t* dst, int64_t elements, uint64_t seed, float scale,
                             float offset, cudaStream_t stream);
// dst[i] = fp32(src[i]) for bf16 src (downloads).
cudaError_t LaunchBf16ToFloat(const uint16_t* src, int64_t elements, float* dst,
                              cudaStream_t stream);

}  // namespace cuda
}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_CUDA_CUDA_KERNELS_H_
