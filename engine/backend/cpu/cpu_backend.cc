#include "engine/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/backend/cpu/cpu_attention.h"
#include "engine/backend/cpu/cpu_gemm.h"
#include "engine/backend/cpu/cpu_row_stats.h"
#include "engine/backend/cpu/cpu_vector_math.h"
#include "engine/backend/cpu/thread_pool.h"
#include "engine/backend/kernel_math.h"
#include "engine/core/status_macros.h"

namespace dllm {
namespace {

constexpr int64_t kAlignment = 64;

// Host memory, 64-byte aligned and zero-filled.
class CpuBuffer final : public DeviceBuffer {
 public:
  static absl::StatusOr<std::unique_ptr<CpuBuffer>> Create(int64_t bytes) {
    if (bytes < 0) return absl::InvalidArgumentError(absl::StrCat("negative size ", bytes));
    const int64_t rounded =
        std::max<int64_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
    void* p = std::aligned_alloc(kAlignment, static_cast<size_t>(rounded));
    if (p == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cpu backend: cannot allocate ", bytes, " bytes"));
    }
    std::memset(p, 0, static_cast<size_t>(rounded));
    return std::unique_ptr<CpuBuffer>(new CpuBuffer(static_cast<uint8_t*>(p), bytes));
  }
  ~CpuBuffer() override { std::free(data_); }

  int64_t bytes() const override { return bytes_; }
  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  float* f32() { return reinterpret_cast<float*>(data_); }
  const float* f32() const { return reinterpret_cast<const float*>(data_); }
  const int32_t* i32() const { return reinterpret_cast<const int32_t*>(data_); }
  int32_t* i32() { return reinterpret_cast<int32_t*>(data_); }
  const uint16_t* bf16() const { return reinterpret_cast<const uint16_t*>(data_); }

  // Element format of a weight buffer (activations and KV are always fp32).
  GemmWeightType format() const { return format_; }
  void set_format(GemmWeightType format) { format_ = format; }
  int element_bytes() const { return format_ == GemmWeightType::kBF16 ? 2 : 4; }

  // A matrix uploaded by UploadMatrix is held in CpuGemm's panel layout; its logical shape
  // is [packed_rows, packed_cols] (0 x 0 for anything else).
  void set_packed(int64_t rows, int64_t cols) {
    packed_rows_ = rows;
    packed_cols_ = cols;
  }
  bool packed() const { return packed_cols_ > 0; }
  GemmWeight gemm_weight() const { return {data_, format_, packed_rows_, packed_cols_}; }

 private:
  CpuBuffer(uint8_t* data, int64_t bytes) : data_(data), bytes_(bytes) {}
  uint8_t* data_;
  int64_t bytes_;
  GemmWeightType format_ = GemmWeightType::kF32;
  int64_t packed_rows_ = 0, packed_cols_ = 0;
};

const CpuBuffer& Cpu(const DeviceBuffer& b) { return static_cast<const CpuBuffer&>(b); }
CpuBuffer& Cpu(DeviceBuffer& b) { return static_cast<CpuBuffer&>(b); }

// INVALID_ARGUMENT unless `buffer` holds at least `elements` 4-byte values.
absl::Status CheckFits(const DeviceBuffer& buffer, int64_t elements, const char* what) {
  if (elements < 0 || buffer.bytes() < elements * 4) {
    return absl::InvalidArgumentError(absl::StrCat("cpu backend: ", what, " needs ", elements,
                                                   " elements, buffer holds ", buffer.bytes() / 4));
  }
  return absl::OkStatus();
}

// INVALID_ARGUMENT unless the weight buffer `weight` holds at least `elements` elements of
// its own format.
absl::Status CheckWeightFits(const DeviceBuffer& weight, int64_t elements, const char* what) {
  const int bytes = static_cast<const CpuBuffer&>(weight).element_bytes();
  if (elements < 0 || weight.bytes() < elements * bytes) {
    return absl::InvalidArgumentError(absl::StrCat("cpu backend: ", what, " needs ", elements,
                                                   " elements, buffer holds ",
                                                   weight.bytes() / bytes));
  }
  return absl::OkStatus();
}

// Weight elements [offset, offset + count) (row-major logical order) as fp32: a pointer into
// the buffer when it is plain fp32, else widened (or gathered from the panel layout) into
// `scratch`.
const float* WeightAsF32(const CpuBuffer& weight, int64_t offset, int64_t count,
                         std::vector<float>* scratch) {
  if (weight.packed()) {
    const GemmWeight w = weight.gemm_weight();
    scratch->resize(static_cast<size_t>(count));
    for (int64_t e = 0; e < count; ++e) {
      (*scratch)[e] = PackedGemmWeightAt(w, (offset + e) / w.k, (offset + e) % w.k);
    }
    return scratch->data();
  }
  if (weight.format() == GemmWeightType::kF32) return weight.f32() + offset;
  scratch->resize(static_cast<size_t>(count));
  const uint16_t* in = weight.bf16() + offset;
  for (int64_t i = 0; i < count; ++i) {
    (*scratch)[i] = kmath::BitsToFloat(static_cast<uint32_t>(in[i]) << 16);
  }
  return scratch->data();
}

float F16BitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return kmath::BitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return kmath::BitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return kmath::BitsToFloat(sign);
  int shift = 0;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    ++shift;
  }
  mantissa &= 0x3ffu;
  return kmath::BitsToFloat(sign | (static_cast<uint32_t>(113 - shift) << 23) | (mantissa << 13));
}

// Work below this many elements runs on the calling thread (pool overhead would dominate).
constexpr int64_t kParallelMinElements = 1 << 15;

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) : pool_(threads) {}

  std::string_view name() const override { return "cpu"; }
  int activation_bytes_per_element() const override { return 4; }
  int kv_bytes_per_element() const override { return 4; }

  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(int64_t bytes) override {
    auto buffer = CpuBuffer::Create(bytes);
    if (!buffer.ok()) return buffer.status();
    return std::unique_ptr<DeviceBuffer>(std::move(*buffer));
  }

  absl::StatusOr<std::unique_ptr<DeviceBuffer>> UploadWeights(DType dtype,
                                                              std::span<const uint8_t> bytes,
                                                              int64_t elements) override {
    if (elements < 0 || static_cast<int64_t>(bytes.size()) != elements * DTypeSize(dtype)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cpu backend: weight of ", elements, " ", std::string(DTypeName(dtype)),
          " elements needs ", elements * DTypeSize(dtype), " bytes, got ", bytes.size()));
    }
    // bf16 stays bf16 (the GEMM widens it in registers); f16 is widened to fp32 once here.
    const bool keep_bf16 = dtype == DType::kBF16;
    auto buffer = CpuBuffer::Create(elements * (keep_bf16 ? 2 : 4));
    if (!buffer.ok()) return buffer.status();
    const uint8_t* in = bytes.data();
    if (keep_bf16) {
      (*buffer)->set_format(GemmWeightType::kBF16);
      std::memcpy((*buffer)->data(), in, static_cast<size_t>(elements) * 2);
      return std::unique_ptr<DeviceBuffer>(std::move(*buffer));
    }
    float* out = (*buffer)->f32();
    if (dtype == DType::kF32) {
      std::memcpy(out, in, static_cast<size_t>(elements) * 4);
    } else {
      for (int64_t i = 0; i < elements; ++i) {
        const uint16_t h = static_cast<uint16_t>(in[2 * i] | (in[2 * i + 1] << 8));
        out[i] = F16BitsToFloat(h);
      }
    }
    return std::unique_ptr<DeviceBuffer>(std::move(*buffer));
  }

  // The matrix in the stored format (bf16, or fp32 for F32/F16), packed once into CpuGemm's
  // panel layout (cpu_gemm.h); gathers and downloads read it through WeightAsF32.
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> UploadMatrix(DType dtype,
                                                             std::span<const uint8_t> bytes,
                                                             int64_t rows, int64_t cols) override {
    if (rows < 0 || cols < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cpu backend: matrix shape [", rows, ", ", cols, "]"));
    }
    // bf16 and fp32 pack straight from the file's bytes; f16 is widened to fp32 first.
    std::unique_ptr<DeviceBuffer> widened;
    const void* src = bytes.data();
    GemmWeightType format = dtype == DType::kBF16 ? GemmWeightType::kBF16 : GemmWeightType::kF32;
    if (dtype != DType::kBF16 && dtype != DType::kF32) {
      auto plain = UploadWeights(dtype, bytes, rows * cols);
      if (!plain.ok()) return plain;
      widened = std::move(*plain);
      src = Cpu(*widened).data();
    } else if (static_cast<int64_t>(bytes.size()) != rows * cols * DTypeSize(dtype)) {
      return UploadWeights(dtype, bytes, rows * cols);  // its size error names the mismatch
    }
    if (rows == 0 || cols == 0) return UploadWeights(dtype, bytes, rows * cols);
    auto packed = CpuBuffer::Create(PackedGemmWeightBytes(format, rows, cols));
    if (!packed.ok()) return packed.status();
    (*packed)->set_format(format);
    PackGemmWeight(src, format, rows, cols, (*packed)->data());
    (*packed)->set_packed(rows, cols);
    return std::unique_ptr<DeviceBuffer>(std::move(*packed));
  }

  absl::Status UploadInt32(std::span<const int32_t> host, DeviceBuffer* dst,
                           int64_t dst_offset) override {
    DLLM_RETURN_IF_ERROR(
        CheckFits(*dst, dst_offset + static_cast<int64_t>(host.size()), "UploadInt32"));
    if (!host.empty()) {
      std::memcpy(Cpu(*dst).i32() + dst_offset, host.data(), host.size() * sizeof(int32_t));
    }
    return absl::OkStatus();
  }

  absl::Status DownloadFloats(const DeviceBuffer& src, int64_t offset,
                              std::span<float> host) override {
    if (offset < 0) return absl::InvalidArgumentError("DownloadFloats: negative offset");
    // Weight buffers download in fp32 too (bf16 widened), so tests can read any buffer.
    const int64_t count = static_cast<int64_t>(host.size());
    DLLM_RETURN_IF_ERROR(CheckWeightFits(src, offset + count, "DownloadFloats"));
    if (!host.empty()) {
      std::vector<float> widened;
      const float* from = WeightAsF32(Cpu(src), offset, count, &widened);
      std::memcpy(host.data(), from, host.size() * sizeof(float));
    }
    return absl::OkStatus();
  }

  absl::Status EmbeddingGather(const DeviceBuffer& table, int vocab, int hidden,
                               const DeviceBuffer& token_ids, int rows,
                               DeviceBuffer* out) override {
    DLLM_RETURN_IF_ERROR(CheckWeightFits(table, int64_t{vocab} * hidden, "EmbeddingGather table"));
    DLLM_RETURN_IF_ERROR(CheckFits(token_ids, rows, "EmbeddingGather ids"));
    DLLM_RETURN_IF_ERROR(CheckFits(*out, int64_t{rows} * hidden, "EmbeddingGather out"));
    const int32_t* ids = Cpu(token_ids).i32();
    for (int r = 0; r < rows; ++r) {
      if (ids[r] < 0 || ids[r] >= vocab) {
        return absl::InvalidArgumentError(
            absl::StrCat("EmbeddingGather: token id ", ids[r], " outside [0, ", vocab, ")"));
      }
      float* dst = Cpu(*out).f32() + int64_t{r} * hidden;
      const float* row = WeightAsF32(Cpu(table), int64_t{ids[r]} * hidden, hidden, &row_scratch_);
      if (row != dst) std::memcpy(dst, row, sizeof(float) * hidden);
    }
    return absl::OkStatus();
  }

  absl::Status Gemm(const DeviceBuffer& x, int rows, int in_features, const DeviceBuffer& weight,
                    int out_features, const DeviceBuffer* bias, bool accumulate,
                    DeviceBuffer* y) override {
    DLLM_RETURN_IF_ERROR(CheckFits(x, int64_t{rows} * in_features, "Gemm x"));
    DLLM_RETURN_IF_ERROR(
        CheckWeightFits(weight, int64_t{out_features} * in_features, "Gemm weight"));
    DLLM_RETURN_IF_ERROR(CheckFits(*y, int64_t{rows} * out_features, "Gemm y"));
    if (bias != nullptr) DLLM_RETURN_IF_ERROR(CheckWeightFits(*bias, out_features, "Gemm bias"));
    if (&x == y) return absl::InvalidArgumentError("Gemm: y must not alias x");
    const float* b = nullptr;
    if (bias != nullptr) b = WeightAsF32(Cpu(*bias), 0, out_features, &bias_scratch_);
    const CpuBuffer& w = Cpu(weight);
    const GemmWeight gw = w.gemm_weight();
    if (gw.n != out_features || gw.k != in_features) {
      return absl::InvalidArgumentError(
          absl::StrCat("cpu backend: Gemm weight must be a [", out_features, ", ", in_features,
                       "] matrix uploaded with UploadMatrix, got [", gw.n, ", ", gw.k, "]"));
    }
    CpuGemm(Cpu(x).f32(), rows, gw, b, accumulate, Cpu(*y).f32(), &pool_, &gemm_scratch_);
    return absl::OkStatus();
  }

  absl::Status RmsNorm(const DeviceBuffer& x, int rows, int cols, const DeviceBuffer& weight,
                       float eps, DeviceBuffer* out) override {
    DLLM_RETURN_IF_ERROR(CheckFits(x, int64_t{rows} * cols, "RmsNorm x"));
    DLLM_RETURN_IF_ERROR(CheckWeightFits(weight, cols, "RmsNorm weight"));
    DLLM_RETURN_IF_ERROR(CheckFits(*out, int64_t{rows} * cols, "RmsNorm out"));
    const float* xp = Cpu(x).f32();
    const float* w = WeightAsF32(Cpu(weight), 0, cols, &norm_scratch_);
    float* op = Cpu(*out).f32();
    ForRows(rows, cols,
            [&](int64_t r) { kmath::RmsNormRow(xp + r * cols, w, cols, eps, op + r * cols); });
    return absl::OkStatus();
  }

  absl::Status Rope(DeviceBuffer* x, int rows, int heads, int head_dim,
                    const DeviceBuffer& positions, float theta, RopeMode mode) override {
    // mode: the CPU backend rotates in fp32 for both modes (see cpu_backend.h).
    if (head_dim % 2 != 0) return absl::InvalidArgumentError("Rope: head_dim must be even");
    const int64_t width = int64_t{heads} * head_dim;
    DLLM_RETURN_IF_ERROR(CheckFits(*x, rows * width, "Rope x"));
    DLLM_RETURN_IF_ERROR(CheckFits(positions, rows, "Rope positions"));
    const int half = head_dim / 2;
    if (static_cast<int>(inv_freq_.size()) != half || inv_freq_theta_ != theta) {
      inv_freq_.resize(half);
      for (int j = 0; j < half; ++j) inv_freq_[j] = kmath::RopeInvFreq(j, head_dim, theta);
      inv_freq_theta_ = theta;
    }
    const int32_t* pos = Cpu(positions).i32();
    float* xp = Cpu(*x).f32();
    ForRows(rows, width, [&](int64_t r) {
      float cos_sin[2 * 256];
      std::vector<float> heap;
      float* cs = cos_sin;
      if (half > 256) {
        heap.resize(size_t{2} * half);
        cs = heap.data();
      }
      for (int j = 0; j < half; ++j) {
        const float angle = kmath::RopeAngle(pos[r], inv_freq_[j]);
        cs[std::ptrdiff_t{2} * j] = std::cos(angle);
        cs[std::ptrdiff_t{2} * j + 1] = std::sin(angle);
      }
      float* row = xp + r * width;
      for (int h = 0; h < heads; ++h) {
        float* v = row + int64_t{h} * head_dim;
        for (int j = 0; j < half; ++j) {
          const float* c = cs + std::ptrdiff_t{2} * j;
          kmath::RopeRotatePair(v[j], v[j + half], c[0], c[1], &v[j], &v[j + half]);
        }
      }
    });
    return absl::OkStatus();
  }

  absl::Status KvScatter(const DeviceBuffer& k, const DeviceBuffer& v,
                         const DeviceBuffer& positions,
                         std::span<const AttentionSequence> sequences,
                         const AttentionShape& shape) override {
    const int64_t kv_width = int64_t{shape.num_kv_heads} * shape.head_dim;
    for (const AttentionSequence& s : sequences) {
      DLLM_RETURN_IF_ERROR(CheckSequence(s, shape));
      DLLM_RETURN_IF_ERROR(CheckFits(k, (s.row_begin + s.rows) * kv_width, "KvScatter k"));
      DLLM_RETURN_IF_ERROR(CheckFits(v, (s.row_begin + s.rows) * kv_width, "KvScatter v"));
      DLLM_RETURN_IF_ERROR(CheckFits(positions, s.row_begin + s.rows, "KvScatter positions"));
      const int32_t* pos = Cpu(positions).i32();
      float* slab = Cpu(*s.kv).f32();
      const int64_t plane = int64_t{s.capacity_positions} * kv_width;
      float* k_plane = slab + (int64_t{shape.layer} * 2) * plane;
      float* v_plane = k_plane + plane;
      for (int r = s.row_begin; r < s.row_begin + s.rows; ++r) {
        if (pos[r] < 0 || pos[r] >= s.capacity_positions) {
          return absl::InvalidArgumentError(absl::StrCat(
              "KvScatter: position ", pos[r], " outside slab [0, ", s.capacity_positions, ")"));
        }
        std::memcpy(k_plane + pos[r] * kv_width, Cpu(k).f32() + r * kv_width,
                    sizeof(float) * kv_width);
        std::memcpy(v_plane + pos[r] * kv_width, Cpu(v).f32() + r * kv_width,
                    sizeof(float) * kv_width);
      }
    }
    return absl::OkStatus();
  }

  absl::Status Attention(const DeviceBuffer& q, std::span<const AttentionSequence> sequences,
                         const AttentionShape& shape, DeviceBuffer* out) override {
    const int64_t q_width = int64_t{shape.num_heads} * shape.head_dim;
    if (&q == out) return absl::InvalidArgumentError("Attention: out must not alias q");
    for (const AttentionSequence& s : sequences) {
      DLLM_RETURN_IF_ERROR(CheckSequence(s, shape));
      DLLM_RETURN_IF_ERROR(CheckFits(q, (s.row_begin + s.rows) * q_width, "Attention q"));
      DLLM_RETURN_IF_ERROR(CheckFits(*out, (s.row_begin + s.rows) * q_width, "Attention out"));
      if (s.probs != nullptr &&
          static_cast<int64_t>(s.probs->values.size()) != int64_t{s.rows} * s.kv_positions) {
        return absl::InvalidArgumentError(absl::StrCat("Attention: probs holds ",
                                                       s.probs->values.size(), " values, expected ",
                                                       int64_t{s.rows} * s.kv_positions));
      }
    }
    PlanAttentionTasks(sequences, shape);
    const int64_t workers = std::min<int64_t>(pool_.threads(), tasks_.size());
    if (attention_scratch_.size() < static_cast<size_t>(workers)) {
      attention_scratch_.resize(static_cast<size_t>(workers));
    }
    auto run = [&](int64_t worker) {
      for (size_t t = worker; t < tasks_.size(); t += workers) {
        RunAttentionTask(q, sequences, shape, &tasks_[t], out, &attention_scratch_[worker]);
      }
    };
    if (workers <= 1) {
      if (workers == 1) run(0);
    } else {
      pool_.ParallelFor(workers, run);
    }
    // Probability time as wall time: the tasks' seconds over the threads that shared them.
    for (const AttentionTask& t : tasks_) {
      if (t.probs_seconds > 0) {
        sequences[t.sequence].probs->seconds += t.probs_seconds / std::max<int64_t>(1, workers);
      }
    }
    return absl::OkStatus();
  }

  bool fuses_attention_probabilities() const override { return true; }
  bool computes_attention_probabilities() const override { return true; }
  absl::Status AttentionProbabilities(const DeviceBuffer& q, const AttentionSequence& s,
                                      const AttentionShape& shape, std::span<float> out) override {
    const int64_t q_width = int64_t{shape.num_heads} * shape.head_dim;
    const int64_t kv_width = int64_t{shape.num_kv_heads} * shape.head_dim;
    DLLM_RETURN_IF_ERROR(CheckSequence(s, shape));
    DLLM_RETURN_IF_ERROR(
        CheckFits(q, (s.row_begin + s.rows) * q_width, "AttentionProbabilities q"));
    const int64_t L = s.kv_positions;
    if (static_cast<int64_t>(out.size()) != int64_t{s.rows} * L) {
      return absl::InvalidArgumentError(absl::StrCat("AttentionProbabilities: out holds ",
                                                     out.size(), " values, expected ",
                                                     int64_t{s.rows} * L));
    }
    std::fill(out.begin(), out.end(), 0.0f);
    if (s.rows == 0 || L == 0) return absl::OkStatus();
    const CpuAttentionGeometry g{shape.num_heads, shape.num_kv_heads, shape.head_dim, shape.scale};
    const int64_t plane = int64_t{s.capacity_positions} * kv_width;
    const float* k_plane = Cpu(*s.kv).f32() + (int64_t{shape.layer} * 2) * plane;
    const float* qp = Cpu(q).f32() + s.row_begin * q_width;
    // Tasks are blocks of rows; each adds the heads in order 0, 1, ..., so a row's sum does not
    // depend on which thread ran it.
    constexpr int kRowsPerTask = 32;
    const int64_t tasks = (s.rows + kRowsPerTask - 1) / kRowsPerTask;
    const int64_t workers = std::min<int64_t>(pool_.threads(), tasks);
    if (attention_scratch_.size() < static_cast<size_t>(workers)) {
      attention_scratch_.resize(static_cast<size_t>(workers));
    }
    const float weight = 1.0f / static_cast<float>(shape.num_heads);
    auto run = [&](int64_t worker) {
      for (int64_t t = worker; t < tasks; t += workers) {
        const int r0 = static_cast<int>(t * kRowsPerTask);
        const int nr = std::min(kRowsPerTask, s.rows - r0);
        for (int h = 0; h < shape.num_heads; ++h) {
          CpuAttentionProbsHead(qp + r0 * q_width, q_width, nr, h, k_plane, s.kv_positions, g,
                                weight, out.data() + r0 * L, L, &attention_scratch_[worker]);
        }
      }
    };
    if (workers <= 1) {
      run(0);
    } else {
      pool_.ParallelFor(workers, run);
    }
    return absl::OkStatus();
  }

  absl::Status SwiGlu(const DeviceBuffer& gate, const DeviceBuffer& up, int64_t elements,
                      DeviceBuffer* out) override {
    DLLM_RETURN_IF_ERROR(CheckFits(gate, elements, "SwiGlu gate"));
    DLLM_RETURN_IF_ERROR(CheckFits(up, elements, "SwiGlu up"));
    DLLM_RETURN_IF_ERROR(CheckFits(*out, elements, "SwiGlu out"));
    const float* g = Cpu(gate).f32();
    const float* u = Cpu(up).f32();
    float* o = Cpu(*out).f32();
    ForChunks(elements, [&](int64_t begin, int64_t end) {
      CpuSwiGlu(g + begin, u + begin, end - begin, o + begin);
    });
    return absl::OkStatus();
  }

  absl::Status Add(const DeviceBuffer& x, int64_t elements, DeviceBuffer* y) override {
    DLLM_RETURN_IF_ERROR(CheckFits(x, elements, "Add x"));
    DLLM_RETURN_IF_ERROR(CheckFits(*y, elements, "Add y"));
    const float* xp = Cpu(x).f32();
    float* yp = Cpu(*y).f32();
    ForChunks(elements, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) yp[i] += xp[i];
    });
    return absl::OkStatus();
  }

  absl::Status GatherRows(const DeviceBuffer& src, int cols, const DeviceBuffer& row_indices,
                          int rows, DeviceBuffer* dst) override {
    DLLM_RETURN_IF_ERROR(CheckFits(row_indices, rows, "GatherRows indices"));
    DLLM_RETURN_IF_ERROR(CheckFits(*dst, int64_t{rows} * cols, "GatherRows dst"));
    if (&src == dst) return absl::InvalidArgumentError("GatherRows: dst must not alias src");
    const int32_t* idx = Cpu(row_indices).i32();
    const int64_t src_rows = src.bytes() / 4 / std::max(cols, 1);
    for (int r = 0; r < rows; ++r) {
      if (idx[r] < 0 || idx[r] >= src_rows) {
        return absl::InvalidArgumentError(
            absl::StrCat("GatherRows: row ", idx[r], " outside source of ", src_rows, " rows"));
      }
      std::memcpy(Cpu(*dst).f32() + int64_t{r} * cols, Cpu(src).f32() + int64_t{idx[r]} * cols,
                  sizeof(float) * cols);
    }
    return absl::OkStatus();
  }

  absl::Status ScatterRows(const DeviceBuffer& src, int src_row_begin, int cols,
                           const DeviceBuffer& row_indices, int rows, DeviceBuffer* dst) override {
    DLLM_RETURN_IF_ERROR(CheckFits(row_indices, rows, "ScatterRows indices"));
    DLLM_RETURN_IF_ERROR(CheckFits(src, (int64_t{src_row_begin} + rows) * cols, "ScatterRows src"));
    if (&src == dst) return absl::InvalidArgumentError("ScatterRows: dst must not alias src");
    const int32_t* idx = Cpu(row_indices).i32();
    const int64_t dst_rows = dst->bytes() / 4 / std::max(cols, 1);
    for (int r = 0; r < rows; ++r) {
      if (idx[r] < 0 || idx[r] >= dst_rows) {
        return absl::InvalidArgumentError(absl::StrCat(
            "ScatterRows: row ", idx[r], " outside destination of ", dst_rows, " rows"));
      }
      std::memcpy(Cpu(*dst).f32() + int64_t{idx[r]} * cols,
                  Cpu(src).f32() + (int64_t{src_row_begin} + r) * cols, sizeof(float) * cols);
    }
    return absl::OkStatus();
  }

  absl::Status LogitsStats(const DeviceBuffer& logits, int vocab,
                           std::span<const LogitsRowRequest> requests,
                           std::span<RowStats> out) override {
    if (requests.size() != out.size()) {
      return absl::InvalidArgumentError("LogitsStats: requests and out differ in size");
    }
    DLLM_RETURN_IF_ERROR(
        CheckFits(logits, static_cast<int64_t>(requests.size()) * vocab, "LogitsStats logits"));
    if (vocab <= 0) return absl::InvalidArgumentError("LogitsStats: vocab must be positive");
    const float* lp = Cpu(logits).f32();
    // One scratch per row: rows are few and the filter buffers are only filled when sampling.
    std::vector<RowStatsScratch> per_row(requests.size());
    pool_.ParallelFor(static_cast<int64_t>(requests.size()), [&](int64_t r) {
      out[r] = ComputeRowStats(lp + r * vocab, vocab, requests[r], &per_row[r]);
    });
    return absl::OkStatus();
  }

 private:
  // One task of Attention: query head `head` of a sequence's rows, or (head < 0, a sequence
  // that wants its probabilities) every head in order 0, 1, ... of rows [row_begin,
  // row_begin + rows) of the sequence, so that a probability row sums its heads in the same
  // order whichever thread runs it. A row's values never depend on the task split.
  struct AttentionTask {
    int sequence;
    int head;
    int row_begin = 0;
    int rows = 0;
    double probs_seconds = 0;
  };

  // Fills tasks_: per (sequence, head), or per block of rows for a sequence with probs (as
  // many blocks as threads, at least 32 rows each: each block transposes every kv head again).
  void PlanAttentionTasks(std::span<const AttentionSequence> sequences,
                          const AttentionShape& shape) {
    tasks_.clear();
    for (size_t i = 0; i < sequences.size(); ++i) {
      const AttentionSequence& s = sequences[i];
      if (s.rows == 0) continue;
      const int seq = static_cast<int>(i);
      if (s.probs == nullptr) {
        for (int h = 0; h < shape.num_heads; ++h) tasks_.push_back({seq, h, 0, s.rows});
        continue;
      }
      const int threads = static_cast<int>(pool_.threads());
      const int block = std::max(32, (s.rows + threads - 1) / std::max(1, threads));
      for (int r0 = 0; r0 < s.rows; r0 += block) {
        tasks_.push_back({seq, -1, r0, std::min(block, s.rows - r0)});
      }
    }
  }

  void RunAttentionTask(const DeviceBuffer& q, std::span<const AttentionSequence> sequences,
                        const AttentionShape& shape, AttentionTask* task, DeviceBuffer* out,
                        CpuAttentionScratch* scratch) {
    const AttentionSequence& s = sequences[task->sequence];
    const int64_t q_width = int64_t{shape.num_heads} * shape.head_dim;
    const int64_t kv_width = int64_t{shape.num_kv_heads} * shape.head_dim;
    const CpuAttentionGeometry g{shape.num_heads, shape.num_kv_heads, shape.head_dim, shape.scale};
    const int64_t plane = int64_t{s.capacity_positions} * kv_width;
    const float* k_plane = Cpu(*s.kv).f32() + (int64_t{shape.layer} * 2) * plane;
    const float* v_plane = k_plane + plane;
    const int64_t first_row = s.row_begin + task->row_begin;
    const float* qp = Cpu(q).f32() + first_row * q_width;
    float* op = Cpu(*out).f32() + first_row * q_width;
    if (task->head >= 0) {
      CpuAttentionHead(qp, q_width, task->rows, task->head, k_plane, v_plane, s.kv_positions, g, op,
                       scratch);
      return;
    }
    const int64_t L = s.kv_positions;
    CpuProbsSink sink{s.probs->values.data() + task->row_begin * L, L,
                      1.0f / static_cast<float>(shape.num_heads)};
    const auto start = std::chrono::steady_clock::now();
    std::fill_n(sink.out, task->rows * L, 0.0f);
    sink.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (int h = 0; h < shape.num_heads; ++h) {
      CpuAttentionHead(qp, q_width, task->rows, h, k_plane, v_plane, s.kv_positions, g, op, scratch,
                       &sink);
    }
    task->probs_seconds = sink.seconds;
  }

  absl::Status CheckSequence(const AttentionSequence& s, const AttentionShape& shape) const {
    if (s.kv == nullptr) return absl::InvalidArgumentError("attention sequence without slab");
    if (s.rows < 0 || s.row_begin < 0 || s.kv_positions < 0 ||
        s.kv_positions > s.capacity_positions || shape.layer < 0 ||
        shape.layer >= shape.num_layers || shape.num_kv_heads <= 0 ||
        shape.num_heads % shape.num_kv_heads != 0) {
      return absl::InvalidArgumentError("malformed attention sequence or shape");
    }
    const int64_t slab_elements =
        int64_t{shape.num_layers} * 2 * s.capacity_positions * shape.num_kv_heads * shape.head_dim;
    return CheckFits(*s.kv, slab_elements, "KV slab");
  }

  // fn(r) for each row; parallel when the work is large enough to pay for the pool.
  template <typename Fn>
  void ForRows(int64_t rows, int64_t cols, Fn fn) {
    if (rows * cols < kParallelMinElements || rows == 1) {
      for (int64_t r = 0; r < rows; ++r) fn(r);
      return;
    }
    pool_.ParallelFor(rows, [&](int64_t r) { fn(r); });
  }

  // fn(begin, end) over fixed element chunks (elementwise ops: no reductions).
  template <typename Fn>
  void ForChunks(int64_t elements, Fn fn) {
    if (elements < kParallelMinElements) {
      fn(0, elements);
      return;
    }
    const int64_t chunk = kParallelMinElements;
    const int64_t chunks = (elements + chunk - 1) / chunk;
    pool_.ParallelFor(chunks,
                      [&](int64_t c) { fn(c * chunk, std::min(elements, (c + 1) * chunk)); });
  }

  ThreadPool pool_;
  std::vector<float> gemm_scratch_;  // Gemm: x packed into register-tile order
  std::vector<float> row_scratch_;   // EmbeddingGather: one bf16 row widened
  std::vector<float> bias_scratch_;  // Gemm: a bf16 bias widened
  std::vector<float> norm_scratch_;  // RmsNorm: a bf16 weight widened
  std::vector<float> inv_freq_;
  float inv_freq_theta_ = 0;
  std::vector<AttentionTask> tasks_;
  std::vector<CpuAttentionScratch> attention_scratch_;  // one per worker of Attention
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(int threads) {
  if (threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat("cpu threads must be >= 0, got ", threads));
  }
  const int pool_threads =
      threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::unique_ptr<Backend>(new CpuBackend(pool_threads));
}

}  // namespace dllm
