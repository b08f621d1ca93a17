#include "engine/backend/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "engine/backend/cuda/arena_free_list.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_index_math.h"
#include "engine/backend/cuda/cuda_kernels.h"
#include "engine/backend/cuda/gemm_lt.h"
#include "engine/core/float16.h"
#include "engine/core/status_macros.h"

namespace dllm {
namespace {

using cuda::DeviceRowStats;

static_assert(sizeof(DeviceRowStats) == sizeof(RowStats), "DeviceRowStats mirrors RowStats");
static_assert(offsetof(DeviceRowStats, token_prob) == offsetof(RowStats, token_prob),
              "DeviceRowStats mirrors RowStats");
static_assert(offsetof(DeviceRowStats, argmax_prob) == offsetof(RowStats, argmax_prob),
              "DeviceRowStats mirrors RowStats");
static_assert(offsetof(DeviceRowStats, top_logprobs) == offsetof(RowStats, top_logprobs),
              "DeviceRowStats mirrors RowStats");
static_assert(cuda::kDeviceMaxTopLogprobs == kMaxTopLogprobs, "one bound on both sides");

constexpr int kBf16Bytes = 2;

// The kernels' view of an attention shape (num_layers is the slab's, not the kernels').
cuda::AttnParams ToAttnParams(const AttentionShape& shape) {
  cuda::AttnParams params;
  params.num_heads = shape.num_heads;
  params.num_kv_heads = shape.num_kv_heads;
  params.head_dim = shape.head_dim;
  params.layer = shape.layer;
  params.scale = shape.scale;
  return params;
}

// ---- Device arena ---------------------------------------------------------------------------

// Chunks of device memory with a free list each. Internally locked: a buffer may be released
// (e.g. a KV slab dropped by a cancelled request) on another thread than the worker's.

class DeviceArena {
 public:
  struct Block {
    int chunk = -1;
    int64_t offset = 0;
    int64_t bytes = 0;
    void* ptr = nullptr;
  };

  explicit DeviceArena(int64_t chunk_bytes) : chunk_bytes_(chunk_bytes) {}
  ~DeviceArena() {
    for (Chunk& c : chunks_) cudaFree(c.base);
  }

  absl::Status AddChunk(int64_t bytes) {
    absl::MutexLock lock(&mu_);
    return AddChunkLocked(bytes);
  }

  absl::StatusOr<Block> Allocate(int64_t bytes) {
    absl::MutexLock lock(&mu_);
    for (int i = 0; i < static_cast<int>(chunks_.size()); ++i) {
      if (std::optional<int64_t> off = chunks_[i].list.Allocate(bytes)) {
        return Block{i, *off, bytes, static_cast<char*>(chunks_[i].base) + *off};
      }
    }
    absl::Status grown = AddChunkLocked(std::max(cuda::ArenaRoundUp(bytes), chunk_bytes_));
    if (!grown.ok()) {
      return absl::ResourceExhaustedError(absl::StrCat("CUDA arena cannot hold ", bytes,
                                                       " more bytes (", reserved_,
                                                       " reserved): ", grown.message()));
    }
    const int i = static_cast<int>(chunks_.size()) - 1;
    std::optional<int64_t> off = chunks_[i].list.Allocate(bytes);
    if (!off) return absl::InternalError("fresh arena chunk cannot hold its request");
    return Block{i, *off, bytes, static_cast<char*>(chunks_[i].base) + *off};
  }

  void Free(const Block& b) {
    absl::MutexLock lock(&mu_);
    chunks_[b.chunk].list.Free(b.offset, b.bytes);
  }
  int64_t reserved() const {
    absl::MutexLock lock(&mu_);
    return reserved_;
  }

 private:
  struct Chunk {
    void* base;
    cuda::ArenaFreeList list;
  };

  absl::Status AddChunkLocked(int64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    bytes = cuda::ArenaRoundUp(bytes);
    void* base = nullptr;
    DLLM_CUDA_RETURN_IF_ERROR(cudaMalloc(&base, static_cast<size_t>(bytes)));
    chunks_.push_back(Chunk{base, cuda::ArenaFreeList(bytes)});
    reserved_ += bytes;
    return absl::OkStatus();
  }

  const int64_t chunk_bytes_;
  mutable absl::Mutex mu_;
  int64_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Chunk> chunks_ ABSL_GUARDED_BY(mu_);
};

// ---- Buffers -------------------------------------------------------------------------------

class CudaBuffer : public DeviceBuffer {
 public:
  // Arena-backed.
  CudaBuffer(std::shared_ptr<DeviceArena> arena, DeviceArena::Block block)
      : arena_(std::move(arena)), block_(block), ptr_(block.ptr), bytes_(block.bytes) {}
  // Owns a cudaMalloc'd allocation (weights).
  CudaBuffer(void* ptr, int64_t bytes) : ptr_(ptr), bytes_(bytes) {}
  ~CudaBuffer() override {
    if (arena_) {
      arena_->Free(block_);
    } else if (ptr_ != nullptr) {
      cudaFree(ptr_);
    }
  }
  int64_t bytes() const override { return bytes_; }
  void* data() const { return ptr_; }
  uint16_t* bf16() const { return static_cast<uint16_t*>(ptr_); }
  int32_t* i32() const { return static_cast<int32_t*>(ptr_); }

 private:
  std::shared_ptr<DeviceArena> arena_;
  DeviceArena::Block block_;
  void* ptr_;
  int64_t bytes_;
};

absl::StatusOr<const CudaBuffer*> AsCuda(const DeviceBuffer* b, const char* what) {
  const auto* c = dynamic_cast<const CudaBuffer*>(b);
  if (c == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": buffer is null or was not created by the CUDA backend"));
  }
  return c;
}

absl::Status NeedBytes(const CudaBuffer* b, int64_t bytes, const char* what) {
  if (bytes < 0 || b->bytes() < bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": buffer holds ", b->bytes(), " bytes, the call needs ", bytes));
  }
  return absl::OkStatus();
}

#define DLLM_ASSIGN_CUDA_BUFFER(var, ptr, what)                     \
  absl::StatusOr<const CudaBuffer*> var##_or = AsCuda((ptr), what); \
  if (!var##_or.ok()) return var##_or.status();                     \
  const CudaBuffer* var = *var##_or  // NOLINT(bugprone-macro-parentheses): a declarator

// ---- Staging ring ----------------------------------------------------------------------------

// Pinned host memory mirrored by device memory of the same size: a slot at offset o is
// host_[o] / dev_[o]. Slots are handed out in order and recycled only after a full stream
// synchronization (Reset), so a host write never races a pending copy.
class StagingRing {
 public:
  ~StagingRing() { Release(); }

  absl::Status Init(int64_t bytes) {
    Release();
    capacity_ = cuda::ArenaRoundUp(bytes);
    DLLM_CUDA_RETURN_IF_ERROR(cudaMallocHost(&host_, static_cast<size_t>(capacity_)));
    DLLM_CUDA_RETURN_IF_ERROR(cudaMalloc(&dev_, static_cast<size_t>(capacity_)));
    used_ = 0;
    return absl::OkStatus();
  }

  // A slot of `bytes` bytes; may synchronize `stream` (ring full) or grow (request larger
  // than the ring).
  absl::Status Reserve(int64_t bytes, cudaStream_t stream, char** host, char** dev) {
    const int64_t size = cuda::ArenaRoundUp(bytes);
    if (used_ + size > capacity_) {
      DLLM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
      used_ = 0;
      if (size > capacity_) DLLM_RETURN_IF_ERROR(Init(std::max(size, 2 * capacity_)));
    }
    *host = host_ + used_;
    *dev = dev_ + used_;
    used_ += size;
    return absl::OkStatus();
  }

  // Copies host bytes to a device slot (stream-ordered); returns the device pointer.
  absl::StatusOr<void*> Stage(const void* src, int64_t bytes, cudaStream_t stream) {
    char *h = nullptr, *d = nullptr;
    DLLM_RETURN_IF_ERROR(Reserve(bytes, stream, &h, &d));
    if (bytes > 0) {
      std::memcpy(h, src, static_cast<size_t>(bytes));
      DLLM_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(d, h, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream));
    }
    return static_cast<void*>(d);
  }

  // Everything issued before has finished: all slots are free again.
  void Reset() { used_ = 0; }

 private:
  void Release() {
    if (host_ != nullptr) cudaFreeHost(host_);
    if (dev_ != nullptr) cudaFree(dev_);
    host_ = nullptr;
    dev_ = nullptr;
  }
  char* host_ = nullptr;
  char* dev_ = nullptr;
  int64_t capacity_ = 0;
  int64_t used_ = 0;
};

// ---- Host conversions --------------------------------------------------------------------

// Little-endian host values of `dtype` → bf16 bit patterns.
std::vector<uint16_t> ToBf16(DType dtype, std::span<const uint8_t> bytes, int64_t elements) {
  std::vector<uint16_t> out(static_cast<size_t>(elements));
  for (int64_t i = 0; i < elements; ++i) {
    if (dtype == DType::kF32) {
      float f;
      std::memcpy(&f, bytes.data() + 4 * i, 4);
      out[i] = FloatToBf16(f);
    } else {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      out[i] = FloatToBf16(F16ToFloat(h));
    }
  }
  return out;
}

// ---- The backend ---------------------------------------------------------------------------

class CudaBackendImpl : public CudaBackend {
 public:
  explicit CudaBackendImpl(const CudaBackendOptions& options)
      : options_(options), arena_(std::make_shared<DeviceArena>(options.arena_chunk_bytes)) {}

  ~CudaBackendImpl() override {
    if (stream_ != nullptr) {
      cudaSetDevice(options_.device);
      cudaStreamSynchronize(stream_);
    }
    gemm_.reset();
    staging_.reset();
    if (probs_begin_ != nullptr) cudaEventDestroy(probs_begin_);
    if (probs_end_ != nullptr) cudaEventDestroy(probs_end_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::Status Init() {
    DLLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    cudaDeviceProp prop{};
    DLLM_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, options_.device));
    if (prop.major < 8) {
      return absl::FailedPreconditionError(absl::StrCat(
          "CUDA device ", options_.device, " (", prop.name, ") has compute capability ", prop.major,
          ".", prop.minor, "; the bf16 kernels need 8.0 or newer"));
    }
    device_name_ = absl::StrCat(prop.name, " (sm_", prop.major, prop.minor, ", ",
                                prop.multiProcessorCount, " SMs)");
    DLLM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    DLLM_CUDA_RETURN_IF_ERROR(cuda::InitKernelAttributes());
    staging_ = std::make_unique<StagingRing>();
    DLLM_RETURN_IF_ERROR(staging_->Init(options_.staging_bytes));
    cuda::LtGemmOptions gemm_options;
    gemm_options.workspace_bytes = options_.gemm_workspace_bytes;
    gemm_options.batch_invariant = options_.gemm_batch_invariant;
    gemm_options.reference_rows = options_.gemm_reference_rows;
    absl::StatusOr<std::unique_ptr<cuda::LtGemm>> gemm =
        cuda::LtGemm::Create(stream_, gemm_options);
    if (!gemm.ok()) return gemm.status();
    gemm_ = *std::move(gemm);
    if (options_.arena_reserve_bytes > 0)
      DLLM_RETURN_IF_ERROR(ReserveArena(options_.arena_reserve_bytes));
    return absl::OkStatus();
  }

  std::string_view name() const override { return "cuda"; }
  int activation_bytes_per_element() const override { return kBf16Bytes; }
  int kv_bytes_per_element() const override { return kBf16Bytes; }

  // ---- Memory ----

  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(int64_t bytes) override {
    if (bytes < 0) return absl::InvalidArgumentError(absl::StrCat("Allocate: bytes ", bytes));
    DLLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    absl::StatusOr<DeviceArena::Block> block = arena_->Allocate(bytes);
    if (!block.ok()) return block.status();
    auto buffer = std::make_unique<CudaBuffer>(arena_, *block);
    if (bytes > 0) {
      DLLM_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(buffer->data(), 0, static_cast<size_t>(bytes), stream_));
    }
    return std::unique_ptr<DeviceBuffer>(std::move(buffer));
  }

  absl::StatusOr<std::unique_ptr<DeviceBuffer>> UploadWeights(DType dtype,
                                                              std::span<const uint8_t> bytes,
                                                              int64_t elements) override {
    const int size = DTypeSize(dtype);
    if (size == 0 || elements < 0 ||
        static_cast<int64_t>(bytes.size()) != elements * static_cast<int64_t>(size)) {
      return absl::InvalidArgumentError(absl::StrCat("UploadWeights: ", bytes.size(),
                                                     " bytes do not hold ", elements,
                                                     " elements of ", size, " bytes"));
    }
    DLLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    std::vector<uint16_t> converted;
    const void* src = bytes.data();
    if (dtype != DType::kBF16) {
      converted = ToBf16(dtype, bytes, elements);
      src = converted.data();
    }
    const int64_t dev_bytes = std::max<int64_t>(elements * kBf16Bytes, kBf16Bytes);
    void* ptr = nullptr;
    DLLM_CUDA_RETURN_IF_ERROR(cudaMalloc(&ptr, static_cast<size_t>(dev_bytes)));
    auto buffer = std::make_unique<CudaBuffer>(ptr, elements * kBf16Bytes);
    if (elements > 0) {
      // Queue the copy behind earlier work, then wait: the host source may go away on return.
      DLLM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ptr, src, static_cast<size_t>(elements) * 2,
                                                cudaMemcpyHostToDevice, stream_));
      DLLM_RETURN_IF_ERROR(SyncInternal());
    }
    return std::unique_ptr<DeviceBuffer>(std::move(buffer));
  }

  absl::Status UploadInt32(std::span<const int32_t> host, DeviceBuffer* dst,
                           int64_t dst_offset) override {
    DLLM_ASSIGN_CUDA_BUFFER(d, dst, "UploadInt32");
    if (dst_offset < 0) return absl::InvalidArgumentError("UploadInt32: negative offset");
    DLLM_RETURN_IF_ERROR(
        NeedBytes(d, (dst_offset + static_cast<int64_t>(host.size())) * 4, "UploadInt32"));
    if (host.empty()) return absl::OkStatus();
    DLLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    const int64_t bytes = static_cast<int64_t>(host.size()) * 4;
    char *h = nullptr, *unused = nullptr;
    DLLM_RETURN_IF_ERROR(staging_->Reserve(bytes, stream_, &h, &unused));
    std::memcpy(h, host.data(), static_cast<size_t>(bytes));
    DLLM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d->i32() + dst_offset, h, static_cast<size_t>(bytes),
                                              cudaMemcpyHostToDevice, stream_));
    return absl::OkStatus();
  }

  absl::Status DownloadFloats(const DeviceBuffer& src, int64_t offset,
                              std::span<float> host) override {
    DLLM_ASSIGN_CUDA_BUFFER(s, &src, "DownloadFloats");
    if (offset < 0) return absl::InvalidArgumentError("DownloadFloats: negative offset");
    const int64_t n = static_cast<int64_t>(host.size());
    DLLM_RETURN_IF_ERROR(NeedBytes(s, (offset + n) * kBf16Bytes, "DownloadFloats"));
    DLLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    std::vector<uint16_t> raw(static_cast<size_t>(n));
    if (n > 0) {
      DLLM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(raw.data(), s->bf16() + offset,
                                                static_cast<size_t>(n) * 2, cudaMemcpyDeviceToHost,
                                                stream_));
    }
    DLLM_RETURN_IF_ERROR(SyncInternal());
    for (int64_t i = 0; i < n; ++i) host[i] = Bf16ToFloat(raw[i]);
    return absl::OkStatus();
  }

  // ---- Ops ----

  absl::Status EmbeddingGather(const DeviceBuffer& table, int vocab, int hidden,
                               const DeviceBuffer& token_ids, int rows,
                               DeviceBuffer* out) override {
    DLLM_ASSIGN_CUDA_BUFFER(t, &table, "EmbeddingGather table");
    DLLM_ASSIGN_CUDA_BUFFER(ids, &token_ids, "EmbeddingGather token_ids");
    DLLM_ASSIGN_CUDA_BUFFER(o, out, "EmbeddingGather out");
    if (vocab <= 0 || hidden <= 0 || rows < 0) {
      return absl::InvalidArgumentError("EmbeddingGather: bad shape");
    }
    DLLM_RETURN_IF_ERROR(
        NeedBytes(t, int64_t{vocab} * hidden * kBf16Bytes, "EmbeddingGather table"));
    DLLM_RETURN_IF_ERROR(NeedBytes(ids, int64_t{rows} * 4, "EmbeddingGather token_ids"));
    DLLM_RETURN_IF_ERROR(NeedBytes(o, int64_t{rows} * hidden * kBf16Bytes, "EmbeddingGather out"));
    DLLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    DLLM_CUDA_RETURN_IF_ERROR(
        cuda::LaunchGatherRows(t->bf16(), vocab, hidden, ids->i32(), rows, o->bf16(), stream_));
    return absl::OkStatus();
  }

  absl::Status Gemm(const DeviceBuffer& x, int rows, int in_features, const DeviceBuffer& weight,
                    int out_features, const DeviceBuffer* bias, bool accumulate,
                    DeviceBuffer* y) override {
    DLLM_ASSIGN_CUDA_BUFFER(xb, &x, "Gemm x");
    DLLM_ASSIGN_CUDA_BUFFER(w, &weight, "Gemm weight");
    DLLM_ASSIGN_CUDA_BUFFER(yb, y, "Gemm y");
    if (rows < 0 || in_features <= 0 || out_features <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Gemm: bad shape rows=", rows, " in=", in_features, " out=", out_features));
    }
    DLLM_RETURN_IF_ERROR(NeedBytes(xb, int64_t{rows} * in_features * kBf16Bytes, "Gemm x"));
    DLLM_RETURN_IF_ERROR(
        NeedBytes(w, int64_t{out_features} * in_features * kBf16Bytes, "Gemm weight"));
    DLLM_RETURN_IF_ERROR(NeedBytes(yb, int64_t{rows} * out_features * kBf16Bytes, "Gemm y"));
    const void* bias_ptr = nullptr;
    if (bias != nullptr) {
      DLLM_ASSIGN_CUDA_BUFFER(bb, bias, "Gemm bias");
      DLLM_RETURN_IF_ERROR(NeedBytes(bb, int64_t{out_features} * kBf16Bytes, "Gemm bias"));
      bias_ptr = bb->data();
    }
    if (rows == 0) return absl::OkStatus();
    DLLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    return gemm_->Run(xb->data(), rows, in_features, w->data(), out_features, bias_ptr, accumulate,
                      yb->data());
  }

  absl::Status RmsNorm(const DeviceBuffer& x, int rows, int cols, const DeviceBuffer& weight,
                       float eps, DeviceBuffer* out) override {
    DLLM_ASSIGN_CUDA_BUFFER(xb, &x, "RmsNorm x");
    DLLM_ASSIGN_CUDA_BUFFER(w, &weight, "RmsNorm weight");
    DLLM_ASSIGN_CUDA_BUFFER(o, out, "RmsNorm out");
    if (rows < 0 || cols <= 0) return absl::InvalidArgumentError("RmsNorm: bad shape");
    DLLM_RETURN_IF_ERROR(NeedBytes(xb, int64_t{rows} * cols * kBf16Bytes, "RmsNorm x"));
    DLLM_RETURN_IF_ERROR(NeedBytes(w, int64_t{cols} * kBf16Bytes, "RmsNorm weight"));
    DLLM_RETURN_IF_ERROR(NeedBytes(o, int64_t{rows} * cols * kBf16Bytes, "RmsNorm out"));
    DLLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    DLLM_CUDA_RETURN_IF_ERROR(
        cuda::LaunchRmsNorm(xb->bf16(), rows, cols, w->bf16(), eps, o->bf16(), stream_));
    return absl::OkStatus();
  }

  absl::Status Rope(DeviceBuffer* x, int rows, int heads, int head_dim,
                    const DeviceBuffer& positions, float theta, RopeMode mode) override {
    DLLM_ASSIGN_CUDA_BUFFER(xb, x, "Rope x");
    DLLM_ASSIGN_CUDA_BUFFER(pos, &positions, "Rope positions");
    if (rows < 0 || heads <= 0 || head_dim <= 0 || head_dim % 2 != 0) {
      return absl::InvalidArgumentError("Rope: bad shape (head_dim must be even)");
    }
    DLLM_RETURN_IF_ERROR(NeedBytes(xb, int64_t{rows} * heads * head_dim * kBf16Bytes, "Rope x"));
    DLLM_RETURN_IF_ERROR(NeedBytes(pos, int64_t{rows} * 4, "Rope positions"));
    DLLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    DLLM_CUDA_RETURN_IF_ERROR(cuda::LaunchRope(xb->bf16(), rows, heads, head_dim, pos->i32(), theta,
                                               mode == RopeMode::kBf16Rounded, stream_));
    return absl::OkStatus();
  }

  absl::Status KvScatter(const DeviceBuffer& k, const DeviceBuffer& v,
                         const DeviceBuffer& positions,
                         std::span<const AttentionSequence> sequences,
                         const AttentionShape& shape) override {
    DLLM_ASSIGN_CUDA_BUFFER(kb, &k, "KvScatter k");
    DLLM_ASSIGN_CUDA_BUFFER(vb, &v, "KvScatter v");
    DLLM_ASSIGN_CUDA_BUFFER(pos, &positions, "KvScatter positions");
    DLLM_RETURN_IF_ERROR(CheckShape(shape, "KvScatter"));
    const int kv_width = shape.num_kv_heads * shape.head_dim;
    std::vector<cuda::SeqDesc> seqs;
    int max_rows = 0;
    int rows_end = 0;
    DLLM_RETURN_IF_ERROR(BuildSeqs(sequences, shape, "KvScatter", &seqs, &max_rows, &rows_end));
    DLLM_RETURN_IF_ERROR(NeedBytes(kb, int64_t{rows_end} * kv_width * kBf16Bytes, "KvScatter k"));
    DLLM_RETURN_IF_ERROR(NeedBytes(vb, int64_t{rows_end} * kv_width * kBf16Bytes, "KvScatter v"));
    DLLM_RETURN_IF_ERROR(NeedBytes(pos, int64_t{rows_end} * 4, "KvScatter positions"));
    if (seqs.empty() || max_rows == 0) return absl::OkStatus();
    DLLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    absl::StatusOr<void*> dev_seqs = staging_->Stage(
        seqs.data(), static_cast<int64_t>(seqs.size() * sizeof(cuda::SeqDesc)), stream_);
    if (!dev_seqs.ok()) return dev_seqs.status();
    DLLM_CUDA_RETURN_IF_ERROR(cuda::LaunchKvScatter(
        kb->bf16(), vb->bf16(), pos->i32(), static_cast<const cuda::SeqDesc*>(*dev_seqs),
        static_cast<int>(seqs.size()), max_rows, kv_width, shape.layer, stream_));
    return absl::OkStatus();
  }

  absl::Status Attention(const DeviceBuffer& q, std::span<const AttentionSequence> sequences,
                         const AttentionShape& shape, DeviceBuffer* out) override {
    DLLM_ASSIGN_CUDA_BUFFER(qb, &q, "Attention q");
    DLLM_ASSIGN_CUDA_BUFFER(o, out, "Attention out");
    DLLM_RETURN_IF_ERROR(CheckShape(shape, "Attention"));
    if (!cuda::AttentionSupportsHeadDim(shape.head_dim)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Attention: head_dim ", shape.head_dim, " is not supported"));
    }
    const int q_width = shape.num_heads * shape.head_dim;
    std::vector<cuda::SeqDesc> seqs;
    int max_rows = 0;
    int rows_end = 0;
    DLLM_RETURN_IF_ERROR(BuildSeqs(sequences, shape, "Attention", &seqs, &max_rows, &rows_end));
    DLLM_RETURN_IF_ERROR(NeedBytes(qb, int64_t{rows_end} * q_width * kBf16Bytes, "Attention q"));
    DLLM_RETURN_IF_ERROR(NeedBytes(o, int64_t{rows_end} * q_width * kBf16Bytes, "Attention out"));
    const int tile_rows = cuda::AttentionTileRows(shape.head_dim);
    std::vector<cuda::AttnTile> tiles;
    for (int s = 0; s < static_cast<int>(seqs.size()); ++s) {
      const int count = cuda_index::TileCount(seqs[s].rows, tile_rows);
      for (int t = 0; t < count; ++t) tiles.push_back(cuda::AttnTile{s, t * tile_rows});
    }
    if (tiles.empty()) return absl::OkStatus();
    DLLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    const cuda::AttnParams params = ToAttnParams(shape);
    if (std::none_of(sequences.begin(), sequences.end(),
                     [](const AttentionSequence& a) { return a.probs != nullptr; })) {
      absl::StatusOr<void*> dev_seqs = staging_->Stage(
          seqs.data(), static_cast<int64_t>(seqs.size() * sizeof(cuda::SeqDesc)), stream_);
      if (!dev_seqs.ok()) return dev_seqs.status();
      absl::StatusOr<void*> dev_tiles = staging_->Stage(
          tiles.data(), static_cast<int64_t>(tiles.size() * sizeof(cuda::AttnTile)), stream_);
      if (!dev_tiles.ok()) return dev_tiles.status();
      DLLM_CUDA_RETURN_IF_ERROR(
          cuda::LaunchAttention(qb->bf16(), static_cast<const cuda::SeqDesc*>(*dev_seqs),
                                static_cast<const cuda::AttnTile*>(*dev_tiles),
                                static_cast<int>(tiles.size()), params, o->bf16(), stream_));
      return absl::OkStatus();
    }
    return AttentionWithProbs(qb, sequences, shape, params, &seqs, tiles, o);
  }

  bool fuses_attention_probabilities() const override { return true; }

  bool computes_attention_probabilities() const override { return true; }

  absl::Status AttentionProbabilities(const DeviceBuffer& q, const AttentionSequence& seq,
                                      const AttentionShape& shape, std::span<float> out) override {
    DLLM_ASSIGN_CUDA_BUFFER(qb, &q, "AttentionProbabilities q");
    DLLM_RETURN_IF_ERROR(CheckShape(shape, "AttentionProbabilities"));
    if (!cuda::AttentionProbsSupportsHeadDim(shape.head_dim)) {
      return absl::InvalidArgumentError(
          absl::StrCat("AttentionProbabilities: head_dim ", shape.head_dim, " is not supported"));
    }
    std::vector<cuda::SeqDesc> seqs;
    int max_rows = 0;
    int rows_end = 0;
    DLLM_RETURN_IF_ERROR(BuildSeqs(std::span<const AttentionSequence>(&seq, 1), shape,
                                   "AttentionProbabilities", &seqs, &max_rows, &rows_end));
    const int64_t q_width = int64_t{shape.num_heads} * shape.head_dim;
    DLLM_RETURN_IF_ERROR(
        NeedBytes(qb, int64_t{rows_end} * q_width * kBf16Bytes, "AttentionProbabilities q"));
    const int64_t values = int64_t{seq.rows} * seq.kv_positions;
    if (static_cast<int64_t>(out.size()) != values) {
      return absl::InvalidArgumentError(absl::StrCat("AttentionProbabilities: out holds ",
                                                     out.size(), " values, expected ", values));
    }
    std::fill(out.begin(), out.end(), 0.0f);
    if (values == 0) return absl::OkStatus();
    DLLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    // One staging slot holds the output and the kernel's score scratch, so that no second
    // reservation can move the first (a ring that grows reallocates).
    const int64_t bytes = 2 * values * static_cast<int64_t>(sizeof(float));
    char *host = nullptr, *dev = nullptr;
    DLLM_RETURN_IF_ERROR(staging_->Reserve(bytes, stream_, &host, &dev));
    float* dev_out = reinterpret_cast<float*>(dev);
    const cuda::AttnParams params = ToAttnParams(shape);
    DLLM_CUDA_RETURN_IF_ERROR(cuda::LaunchAttentionProbs(qb->bf16(), seqs[0], params,
                                                         dev_out + values, dev_out, stream_));
    DLLM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, dev_out,
                                              static_cast<size_t>(values) * sizeof(float),
                                              cudaMemcpyDeviceToHost, stream_));
    DLLM_RETURN_IF_ERROR(SyncInternal());
    std::memcpy(out.data(), host, static_cast<size_t>(values) * sizeof(float));
    return absl::OkStatus();
  }

  absl::Status SwiGlu(const DeviceBuffer& gate, const DeviceBuffer& up, int64_t elements,
                      DeviceBuffer* out) override {
    DLLM_ASSIGN_CUDA_BUFFER(g, &gate, "SwiGlu gate");
    DLLM_ASSIGN_CUDA_BUFFER(u, &up, "SwiGlu up");
    DLLM_ASSIGN_CUDA_BUFFER(o, out, "SwiGlu out");
    DLLM_RETURN_IF_ERROR(NeedBytes(g, elements * kBf16Bytes, "SwiGlu gate"));
    DLLM_RETURN_IF_ERROR(NeedBytes(u, elements * kBf16Bytes, "SwiGlu up"));
    DLLM_RETURN_IF_ERROR(NeedBytes(o, elements * kBf16Bytes, "SwiGlu out"));
    DLLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    DLLM_CUDA_RETURN_IF_ERROR(
        cuda::LaunchSwiGlu(g->bf16(), u->bf16(), elements, o->bf16(), stream_));
    return absl::OkStatus();
  }

  absl::Status Add(const DeviceBuffer& x, int64_t elements, DeviceBuffer* y) override {
    DLLM_ASSIGN_CUDA_BUFFER(xb, &x, "Add x");
    DLLM_ASSIGN_CUDA_BUFFER(yb, y, "Add y");
    DLLM_RETURN_IF_ERROR(NeedBytes(xb, elements * kBf16Bytes, "Add x"));
    DLLM_RETURN_IF_ERROR(NeedBytes(yb, elements * kBf16Bytes, "Add y"));
    DLLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    DLLM_CUDA_RETURN_IF_ERROR(cuda::LaunchAdd(xb->bf16(), elements, yb->bf16(), stream_));
    return absl::OkStatus();
  }

  absl::Status GatherRows(const DeviceBuffer& src, int cols, const DeviceBuffer& row_indices,
                          int rows, DeviceBuffer* dst) override {
    DLLM_ASSIGN_CUDA_BUFFER(s, &src, "GatherRows src");
    DLLM_ASSIGN_CUDA_BUFFER(idx, &row_indices, "GatherRows row_indices");
    DLLM_ASSIGN_CUDA_BUFFER(d, dst, "GatherRows dst");
    if (cols <= 0 || rows < 0) return absl::InvalidArgumentError("GatherRows: bad shape");
    if (s == d) return absl::InvalidArgumentError("GatherRows: dst aliases src");
    DLLM_RETURN_IF_ERROR(NeedBytes(idx, int64_t{rows} * 4, "GatherRows row_indices"));
    DLLM_RETURN_IF_ERROR(NeedBytes(d, int64_t{rows} * cols * kBf16Bytes, "GatherRows dst"));
    const int64_t src_rows = s->bytes() / (int64_t{cols} * kBf16Bytes);
    DLLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    DLLM_CUDA_RETURN_IF_ERROR(
        cuda::LaunchGatherRows(s->bf16(), src_rows, cols, idx->i32(), rows, d->bf16(), stream_));
    return absl::OkStatus();
  }

  // Indices live on the device, so one outside dst is skipped by the kernel rather than
  // reported (the CPU backend reports it); the engine builds them from validated positions.
  absl::Status ScatterRows(const DeviceBuffer& src, int src_row_begin, int cols,
                           const DeviceBuffer& row_indices, int rows, DeviceBuffer* dst) override {
    DLLM_ASSIGN_CUDA_BUFFER(s, &src, "ScatterRows src");
    DLLM_ASSIGN_CUDA_BUFFER(idx, &row_indices, "ScatterRows row_indices");
    DLLM_ASSIGN_CUDA_BUFFER(d, dst, "ScatterRows dst");
    if (cols <= 0 || rows < 0 || src_row_begin < 0) {
      return absl::InvalidArgumentError("ScatterRows: bad shape");
    }
    if (s == d) return absl::InvalidArgumentError("ScatterRows: dst must not alias src");
    DLLM_RETURN_IF_ERROR(NeedBytes(idx, int64_t{rows} * 4, "ScatterRows row_indices"));
    DLLM_RETURN_IF_ERROR(
        NeedBytes(s, (int64_t{src_row_begin} + rows) * cols * kBf16Bytes, "ScatterRows src"));
    const int64_t dst_rows = d->bytes() / (int64_t{cols} * kBf16Bytes);
    DLLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    DLLM_CUDA_RETURN_IF_ERROR(cuda::LaunchScatterRows(s->bf16() + int64_t{src_row_begin} * cols,
                                                      cols, idx->i32(), rows, dst_rows, d->bf16(),
                                                      stream_));
    return absl::OkStatus();
  }

  absl::Status LogitsStats(const DeviceBuffer& logits, int vocab,
                           std::span<const LogitsRowRequest> requests,
                           std::span<RowStats> out) override {
    DLLM_ASSIGN_CUDA_BUFFER(l, &logits, "LogitsStats logits");
    if (out.size() != requests.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("LogitsStats: ", requests.size(), " requests but ", out.size(), " outputs"));
    }
    if (vocab <= 0) return absl::InvalidArgumentError("LogitsStats: vocab must be positive");
    const int rows = static_cast<int>(requests.size());
    DLLM_RETURN_IF_ERROR(NeedBytes(l, int64_t{rows} * vocab * kBf16Bytes, "LogitsStats logits"));
    if (rows == 0) return absl::OkStatus();
    DLLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    std::vector<cuda::RowRequestDesc> descs(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      const LogitsRowRequest& r = requests[i];
      cuda::RowRequestDesc& d = descs[i];
      d.position = r.position;
      d.step = r.step;
      d.temperature = r.sampling.temperature;
      d.top_k = r.sampling.top_k;
      d.top_p = r.sampling.top_p;
      d.seed_lo = static_cast<uint32_t>(r.sampling.seed);
      d.seed_hi = static_cast<uint32_t>(r.sampling.seed >> 32);
      d.top_logprobs = std::clamp(r.sampling.top_logprobs, 0, std::min(kMaxTopLogprobs, vocab));
    }
    absl::StatusOr<void*> dev_requests = staging_->Stage(
        descs.data(), static_cast<int64_t>(descs.size() * sizeof(cuda::RowRequestDesc)), stream_);
    if (!dev_requests.ok()) return dev_requests.status();
    char *host_stats = nullptr, *dev_stats = nullptr;
    const int64_t stats_bytes = int64_t{rows} * static_cast<int64_t>(sizeof(DeviceRowStats));
    DLLM_RETURN_IF_ERROR(staging_->Reserve(stats_bytes, stream_, &host_stats, &dev_stats));
    DLLM_CUDA_RETURN_IF_ERROR(cuda::LaunchLogitsStats(
        l->bf16(), vocab, static_cast<const cuda::RowRequestDesc*>(*dev_requests), rows,
        reinterpret_cast<DeviceRowStats*>(dev_stats), stream_));
    DLLM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        host_stats, dev_stats, static_cast<size_t>(stats_bytes), cudaMemcpyDeviceToHost, stream_));
    DLLM_RETURN_IF_ERROR(SyncInternal());
    std::memcpy(out.data(), host_stats, static_cast<size_t>(stats_bytes));
    return absl::OkStatus();
  }

  // ---- CudaBackend extras ----

  absl::StatusOr<std::unique_ptr<DeviceBuffer>> RandomWeights(int64_t elements, uint64_t seed,
                                                              float scale, float offset) override {
    if (elements < 0) return absl::InvalidArgumentError("RandomWeights: negative size");
    DLLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    void* ptr = nullptr;
    DLLM_CUDA_RETURN_IF_ERROR(
        cudaMalloc(&ptr, static_cast<size_t>(std::max<int64_t>(elements, 1)) * kBf16Bytes));
    auto buffer = std::make_unique<CudaBuffer>(ptr, elements * kBf16Bytes);
    DLLM_CUDA_RETURN_IF_ERROR(
        cuda::LaunchRandomBf16(buffer->bf16(), elements, seed, scale, offset, stream_));
    return std::unique_ptr<DeviceBuffer>(std::move(buffer));
  }

  absl::Status Synchronize() override {
    DLLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    return SyncInternal();
  }

  absl::Status ReserveArena(int64_t bytes) override {
    const int64_t missing = bytes - arena_->reserved();
    if (missing <= 0) return absl::OkStatus();
    DLLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
    return arena_->AddChunk(missing);
  }

  int64_t arena_reserved_bytes() const override { return arena_->reserved(); }
  int64_t gemm_invariance_fallbacks() const override {
    return gemm_ ? gemm_->invariance_fallbacks() : 0;
  }
  std::string device_name() const override { return device_name_; }

 private:
  absl::Status SyncInternal() {
    DLLM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    staging_->Reset();
    return absl::OkStatus();
  }

  static absl::Status CheckShape(const AttentionShape& s, const char* what) {
    if (s.num_heads <= 0 || s.num_kv_heads <= 0 || s.head_dim <= 0 ||
        s.num_heads % s.num_kv_heads != 0 || s.num_layers <= 0 || s.layer < 0 ||
        s.layer >= s.num_layers) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": bad shape heads=", s.num_heads, " kv_heads=", s.num_kv_heads,
                       " head_dim=", s.head_dim, " layer=", s.layer, "/", s.num_layers));
    }
    return absl::OkStatus();
  }

  // Attention whose sequences with AttentionSequence::probs also get their head-averaged
  // probabilities, fused: the attention kernel stores each row's scores and softmax state
  // (SeqDesc::scores), a small kernel per sequence normalizes them, and the values come back
  // to the host before this returns. The descriptors, the tiles and every sequence's scratch
  // share one staging slot, so that no later reservation can move or recycle a part that a
  // kernel still reads. Charged to probs->seconds: the device time from the end of the
  // attention kernel to the end of the copies (CUDA events), split over the sequences by
  // their values; the score stores inside the attention kernel are not separable from it and
  // are not charged.
  absl::Status AttentionWithProbs(const CudaBuffer* qb,
                                  std::span<const AttentionSequence> sequences,
                                  const AttentionShape& shape, const cuda::AttnParams& params,
                                  std::vector<cuda::SeqDesc>* seqs,
                                  const std::vector<cuda::AttnTile>& tiles, const CudaBuffer* o) {
    constexpr int64_t kAlign = 256;
    const auto aligned = [](int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; };
    const int64_t seqs_bytes = static_cast<int64_t>(seqs->size() * sizeof(cuda::SeqDesc));
    const int64_t tiles_bytes = static_cast<int64_t>(tiles.size() * sizeof(cuda::AttnTile));
    struct Slot {
      size_t seq;
      int64_t scores_offset;  // bytes into the slot
      int64_t out_offset;
      int64_t values;
    };
    std::vector<Slot> slots;
    int64_t bytes = aligned(seqs_bytes) + aligned(tiles_bytes);
    int64_t total_values = 0;
    for (size_t i = 0; i < sequences.size(); ++i) {
      const AttentionSequence& a = sequences[i];
      if (a.probs == nullptr) continue;
      const int64_t values = int64_t{a.rows} * a.kv_positions;
      if (static_cast<int64_t>(a.probs->values.size()) != values) {
        return absl::InvalidArgumentError(
            absl::StrCat("Attention: sequence ", i, " probabilities hold ", a.probs->values.size(),
                         " values, expected ", values));
      }
      Slot slot{i, bytes, 0, values};
      bytes += aligned(cuda_index::ScoresFloats(shape.num_heads, a.rows, a.kv_positions) *
                       static_cast<int64_t>(sizeof(float)));
      slot.out_offset = bytes;
      bytes += aligned(values * static_cast<int64_t>(sizeof(float)));
      total_values += values;
      slots.push_back(slot);
    }
    char *host = nullptr, *dev = nullptr;
    DLLM_RETURN_IF_ERROR(staging_->Reserve(bytes, stream_, &host, &dev));
    for (const Slot& slot : slots) {
      (*seqs)[slot.seq].scores = reinterpret_cast<float*>(dev + slot.scores_offset);
    }
    std::memcpy(host, seqs->data(), static_cast<size_t>(seqs_bytes));
    std::memcpy(host + aligned(seqs_bytes), tiles.data(), static_cast<size_t>(tiles_bytes));
    DLLM_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dev, host, static_cast<size_t>(aligned(seqs_bytes) + tiles_bytes),
                        cudaMemcpyHostToDevice, stream_));
    DLLM_CUDA_RETURN_IF_ERROR(
        cuda::LaunchAttention(qb->bf16(), reinterpret_cast<const cuda::SeqDesc*>(dev),
                              reinterpret_cast<const cuda::AttnTile*>(dev + aligned(seqs_bytes)),
                              static_cast<int>(tiles.size()), params, o->bf16(), stream_));
    DLLM_RETURN_IF_ERROR(EnsureProbsEvents());
    DLLM_CUDA_RETURN_IF_ERROR(cudaEventRecord(probs_begin_, stream_));
    for (const Slot& slot : slots) {
      const AttentionSequence& a = sequences[slot.seq];
      float* out = reinterpret_cast<float*>(dev + slot.out_offset);
      DLLM_CUDA_RETURN_IF_ERROR(
          cuda::LaunchAttentionProbsFinish(reinterpret_cast<const float*>(dev + slot.scores_offset),
                                           shape.num_heads, a.rows, a.kv_positions, out, stream_));
      DLLM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host + slot.out_offset, out,
                                                static_cast<size_t>(slot.values) * sizeof(float),
                                                cudaMemcpyDeviceToHost, stream_));
    }
    DLLM_CUDA_RETURN_IF_ERROR(cudaEventRecord(probs_end_, stream_));
    DLLM_RETURN_IF_ERROR(SyncInternal());
    float elapsed_ms = 0;
    DLLM_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&elapsed_ms, probs_begin_, probs_end_));
    for (const Slot& slot : slots) {
      AttentionProbsOut* probs = sequences[slot.seq].probs;
      std::memcpy(probs->values.data(), host + slot.out_offset,
                  static_cast<size_t>(slot.values) * sizeof(float));
      if (total_values > 0) {
        probs->seconds += 1e-3 * elapsed_ms * static_cast<double>(slot.values) /
                          static_cast<double>(total_values);
      }
    }
    return absl::OkStatus();
  }

  absl::Status EnsureProbsEvents() {
    if (probs_begin_ == nullptr) DLLM_CUDA_RETURN_IF_ERROR(cudaEventCreate(&probs_begin_));
    if (probs_end_ == nullptr) DLLM_CUDA_RETURN_IF_ERROR(cudaEventCreate(&probs_end_));
    return absl::OkStatus();
  }

  // Validates the sequences against their slabs and packs them for the kernels.
  static absl::Status BuildSeqs(std::span<const AttentionSequence> sequences,
                                const AttentionShape& shape, const char* what,
                                std::vector<cuda::SeqDesc>* seqs, int* max_rows, int* rows_end) {
    const int kv_width = shape.num_kv_heads * shape.head_dim;
    seqs->reserve(sequences.size());
    for (size_t i = 0; i < sequences.size(); ++i) {
      const AttentionSequence& s = sequences[i];
      absl::StatusOr<const CudaBuffer*> slab = AsCuda(s.kv, what);
      if (!slab.ok()) return slab.status();
      if (s.capacity_positions <= 0 || s.kv_positions < 0 ||
          s.kv_positions > s.capacity_positions || s.rows < 0 || s.row_begin < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": sequence ", i, " has capacity ", s.capacity_positions, ", kv_positions ",
            s.kv_positions, ", rows [", s.row_begin, ", +", s.rows, ")"));
      }
      const int64_t slab_bytes =
          cuda_index::SlabElements(shape.num_layers, s.capacity_positions, kv_width) * kBf16Bytes;
      DLLM_RETURN_IF_ERROR(NeedBytes(*slab, slab_bytes, what));
      cuda::SeqDesc d{};
      d.kv = (*slab)->bf16();
      d.capacity_positions = s.capacity_positions;
      d.kv_positions = s.kv_positions;
      d.row_begin = s.row_begin;
      d.rows = s.rows;
      seqs->push_back(d);
      *max_rows = std::max(*max_rows, s.rows);
      *rows_end = std::max(*rows_end, s.row_begin + s.rows);
    }
    return absl::OkStatus();
  }

  CudaBackendOptions options_;
  std::shared_ptr<DeviceArena> arena_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t probs_begin_ = nullptr;  // AttentionWithProbs's decision-cost clock
  cudaEvent_t probs_end_ = nullptr;
  std::unique_ptr<StagingRing> staging_;
  std::unique_ptr<cuda::LtGemm> gemm_;
  std::string device_name_;
};

}  // namespace

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CreateCudaBackendWithOptions(
    const CudaBackendOptions& options) {
  const int count = CudaDeviceCount();
  if (count <= 0) {
    return absl::FailedPreconditionError("backend \"cuda\": no CUDA device is available");
  }
  if (options.device < 0 || options.device >= count) {
    return absl::InvalidArgumentError(absl::StrCat("backend \"cuda\": device ", options.device,
                                                   " does not exist (", count, " devices)"));
  }
  auto backend = std::make_unique<CudaBackendImpl>(options);
  DLLM_RETURN_IF_ERROR(backend->Init());
  return std::unique_ptr<CudaBackend>(std::move(backend));
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend() {
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend =
      CreateCudaBackendWithOptions(CudaBackendOptions{});
  if (!backend.ok()) return backend.status();
  return std::unique_ptr<Backend>(*std::move(backend));
}

}  // namespace dllm
