// Backend: the device-agnostic compute interface the Transformer runs on.
//
// A backend owns memory (DeviceBuffer) and runs the handful of ops one transformer step
// needs. The Transformer only sequences them; every byte of weights and activations lives
// on the backend, and the only data that comes back to the host on the step path is the
// RowStats of the wanted rows (LogitsStats). DownloadFloats exists for tests and debugging.
//
// Element formats. Weights are uploaded once (UploadWeights) and stored in the backend's
// weight format (CPU: bf16 and fp32 as stored, f16 widened to fp32; CUDA: its choice, e.g.
// bf16). Activation
// buffers hold `activation_bytes_per_element()`-byte floats (CPU: fp32). KV slabs hold
// `kv_bytes_per_element()`-byte floats laid out as
//   [layers][2 (K, V)][capacity_positions][num_kv_heads * head_dim]
// (the KvPool contract). Index buffers (token ids, positions, row indices) hold int32.
// All activation matrices are dense row-major [rows, cols] starting at element 0.
//
// Ops run in issue order (one logical stream). A backend may run them asynchronously as long
// as the observable results are those of issue order; LogitsStats and DownloadFloats return
// after everything issued before them has finished. Ops return an error for arguments that
// do not fit the buffers (INVALID_ARGUMENT) or for device failures (INTERNAL); the
// Transformer validates requests before issuing, so errors here indicate bugs.
//
// Numerics contract (batch invariance). For a given row, every op must compute that row's
// result with the same sequence of floating-point operations whatever the other rows in the
// call are and however many there are: per-row reductions in a fixed order, no algorithm
// switches that depend on the row count for a given row. Attention results of a sequence
// depend only on its own query rows and its own slab.
//
// Thread-safety: not thread-safe; the engine worker owns the backend. Implementations may
// use internal worker threads.
#ifndef DLLM_ENGINE_BACKEND_BACKEND_H_
#define DLLM_ENGINE_BACKEND_BACKEND_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/core/dtype.h"
#include "engine/core/row_stats.h"

namespace dllm {

// Memory owned by a backend. Only the backend that created a buffer may use it.
class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  virtual int64_t bytes() const = 0;

 protected:
  DeviceBuffer() = default;
};

// How RoPE rounds (docs/models.md section 5). kFp32: LLaDA, rotate in fp32. kBf16Rounded: Dream,
// cos/sin and each product/sum rounded to bf16. A backend that computes all activations in
// fp32 (the CPU backend) treats kBf16Rounded as kFp32 and documents it.
enum class RopeMode { kFp32, kBf16Rounded };

// A sequence's head-averaged attention probabilities, computed inside Attention (backends
// whose fuses_attention_probabilities() is true): `values` is host memory [rows,
// kv_positions] (row r for q row row_begin + r), overwritten with the values
// AttentionProbabilities would give; `seconds` grows by the time the pass spent on them
// (decision cost). Owned by the caller; Attention writes it and keeps no reference.
struct AttentionProbsOut {
  std::span<float> values;
  double seconds = 0;
};

// One sequence's part of a batched KvScatter/Attention call. A sequence's query rows are the
// contiguous rows [row_begin, row_begin + rows) of the batch's q/k/v/out matrices.
struct AttentionSequence {
  DeviceBuffer* kv = nullptr;  // the sequence's slab; not owned
  int capacity_positions = 0;  // slab capacity (positions per layer and K/V plane)
  int kv_positions = 0;        // attention reads positions [0, kv_positions) of the slab
  int row_begin = 0;
  int rows = 0;
  AttentionProbsOut* probs = nullptr;  // not null: also its probabilities (see above)
};

struct AttentionShape {
  int num_heads = 0;     // query heads; q/out rows are num_heads * head_dim wide
  int num_kv_heads = 0;  // divides num_heads; kv head j serves q heads j*r .. j*r+r-1
  int head_dim = 0;
  int num_layers = 0;  // slab geometry
  int layer = 0;       // which layer's K/V planes to use
  float scale = 0;     // softmax scale, 1/sqrt(head_dim)
};

// One logits row whose statistics are wanted. `position` and `step` (with sampling.seed) key
// the counter-based RNG; `position` is the predicted position (after any logit shift), and
// is copied into RowStats::position.
struct LogitsRowRequest {
  int32_t position = 0;
  int32_t step = 0;
  SamplingParams sampling;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu", "cuda".
  virtual std::string_view name() const = 0;

  // ---- Memory -------------------------------------------------------------------------
  virtual int activation_bytes_per_element() const = 0;
  virtual int kv_bytes_per_element() const = 0;

  // A zero-filled buffer of `bytes` bytes. RESOURCE_EXHAUSTED when the device is out of
  // memory.
  virtual absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(int64_t bytes) = 0;

  // Converts `elements` host values of `dtype` (little-endian, as in a safetensors file) into
  // a new buffer in the backend's weight format. Called once per tensor at load.
  virtual absl::StatusOr<std::unique_ptr<DeviceBuffer>> UploadWeights(
      DType dtype, std::span<const uint8_t> bytes, int64_t elements) = 0;

  // Like UploadWeights for a matrix [rows, cols] (row-major in `bytes`) that Gemm uses as its
  // weight (rows = out_features, cols = in_features) and EmbeddingGather may read by row.
  // Gemm accepts only weights uploaded this way; a backend may store them in a GEMM-friendly
  // layout (the CPU backend packs column panels). Default: UploadWeights.
  virtual absl::StatusOr<std::unique_ptr<DeviceBuffer>> UploadMatrix(DType dtype,
                                                                     std::span<const uint8_t> bytes,
                                                                     int64_t rows, int64_t cols) {
    return UploadWeights(dtype, bytes, rows * cols);
  }

  // Copies small int32 arrays (token ids, positions, row indices) into `dst` at element
  // offset `dst_offset`.
  virtual absl::Status UploadInt32(std::span<const int32_t> host, DeviceBuffer* dst,
                                   int64_t dst_offset = 0) = 0;

  // Test/debug only: copies elements [offset, offset + host.size()) of `src` (activations,
  // or weights in any stored format) to the host as fp32.
  virtual absl::Status DownloadFloats(const DeviceBuffer& src, int64_t offset,
                                      std::span<float> host) = 0;

  // ---- Ops ----------------------------------------------------------------------------
  // out[r, :] = table[token_ids[r], :] for r < rows. `table` is a weight [vocab, hidden].
  // Token ids are validated by the caller.
  virtual absl::Status EmbeddingGather(const DeviceBuffer& table, int vocab, int hidden,
                                       const DeviceBuffer& token_ids, int rows,
                                       DeviceBuffer* out) = 0;

  // y[rows, out] = x[rows, in] · Wᵀ (+ bias[out]) (+ y when accumulate), W a weight
  // [out, in] (PyTorch nn.Linear layout). `bias` may be null. With accumulate, the product
  // (plus bias) is added to the existing y (fuses the residual add).
  virtual absl::Status Gemm(const DeviceBuffer& x, int rows, int in_features,
                            const DeviceBuffer& weight, int out_features, const DeviceBuffer* bias,
                            bool accumulate, DeviceBuffer* y) = 0;

  // out[r] = x[r] * rsqrt(mean(x[r]^2) + eps) * weight. out may alias x.
  virtual absl::Status RmsNorm(const DeviceBuffer& x, int rows, int cols,
                               const DeviceBuffer& weight, float eps, DeviceBuffer* out) = 0;

  // In place, rotate-half RoPE over each head of x[rows, heads * head_dim] at absolute
  // positions[r]: dim j pairs with j + head_dim/2, inv_freq[j] = 1 / theta^(2j/head_dim).
  virtual absl::Status Rope(DeviceBuffer* x, int rows, int heads, int head_dim,
                            const DeviceBuffer& positions, float theta, RopeMode mode) = 0;

  // For every sequence, writes rows [row_begin, row_begin + rows) of k and v
  // ([rows_total, num_kv_heads * head_dim]) into the sequence's slab at layer `shape.layer`,
  // position positions[row].
  virtual absl::Status KvScatter(const DeviceBuffer& k, const DeviceBuffer& v,
                                 const DeviceBuffer& positions,
                                 std::span<const AttentionSequence> sequences,
                                 const AttentionShape& shape) = 0;

  // Bidirectional attention: for every sequence and each of its query rows and heads,
  // out = softmax(scale · q·Kᵀ) · V over slab positions [0, kv_positions) of layer
  // `shape.layer`. q and out are [rows_total, num_heads * head_dim]; rows not covered by any
  // sequence are left untouched.
  virtual absl::Status Attention(const DeviceBuffer& q,
                                 std::span<const AttentionSequence> sequences,
                                 const AttentionShape& shape, DeviceBuffer* out) = 0;

  // Decision support, not on the step path: for one sequence, the attention probabilities of
  // its query rows averaged over the heads, softmax(scale · q·Kᵀ) over slab positions
  // [0, kv_positions) of layer `shape.layer`, into the host array `out` ([seq.rows,
  // kv_positions], row r for q row seq.row_begin + r). A row's values depend only on its q
  // row and the slab. Backends without it return UNIMPLEMENTED and false from
  // computes_attention_probabilities.
  // Timing the call as decision cost: on a backend that queues work (CUDA), the call waits
  // for the work issued before it, so the caller Synchronize()s before starting its clock.
  virtual bool computes_attention_probabilities() const { return false; }
  // Whether Attention fills AttentionSequence::probs (fused into the attention pass, the way
  // a serving implementation of d2Cache or Elastic-Cache gets them). Where false, Attention
  // ignores `probs` and the caller asks AttentionProbabilities after it.
  virtual bool fuses_attention_probabilities() const { return false; }
  virtual absl::Status AttentionProbabilities(const DeviceBuffer& q, const AttentionSequence& seq,
                                              const AttentionShape& shape, std::span<float> out) {
    return absl::UnimplementedError(
        "this backend does not compute attention probabilities (cache policy d2cache)");
  }

  // out[i] = silu(gate[i]) * up[i] for i < elements. out may alias gate or up.
  virtual absl::Status SwiGlu(const DeviceBuffer& gate, const DeviceBuffer& up, int64_t elements,
                              DeviceBuffer* out) = 0;

  // y[i] += x[i] for i < elements.
  virtual absl::Status Add(const DeviceBuffer& x, int64_t elements, DeviceBuffer* y) = 0;

  // dst[r, :] = src[row_indices[r], :] for r < rows; rows are `cols` wide. dst must not
  // alias src.
  virtual absl::Status GatherRows(const DeviceBuffer& src, int cols,
                                  const DeviceBuffer& row_indices, int rows, DeviceBuffer* dst) = 0;

  // dst[row_indices[r], :] = src[src_row_begin + r, :] for r < rows; rows are `cols` wide.
  // Elastic-Cache's hidden-state slabs (with GatherRows to read them back); backends that do
  // not compute attention probabilities need not have it (UNIMPLEMENTED).
  virtual absl::Status ScatterRows(const DeviceBuffer& src, int src_row_begin, int cols,
                                   const DeviceBuffer& row_indices, int rows, DeviceBuffer* dst) {
    return absl::UnimplementedError("this backend has no ScatterRows (cache policy elastic)");
  }

  // Statistics of logits rows [0, requests.size()) of `logits` ([rows, vocab]) into `out`
  // (same size): argmax (lowest id among ties), its probability, entropy (nats), top1-top2
  // margin, all of softmax(logits) at temperature 1 over the full vocabulary; and the
  // proposed token: argmax when temperature == 0, else a Gumbel-max sample from the
  // tempered distribution filtered by top-p then top-k (Dream's order), keyed by
  // (seed, position, step, token id) through counter_rng.h; token_prob is its untempered,
  // unfiltered probability. Blocks until the results are on the host.
  virtual absl::Status LogitsStats(const DeviceBuffer& logits, int vocab,
                                   std::span<const LogitsRowRequest> requests,
                                   std::span<RowStats> out) = 0;

  // Waits for all issued work. Backends that run each op to completion (CPU) return at once.
  virtual absl::Status Synchronize() { return absl::OkStatus(); }
};

}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_BACKEND_H_
