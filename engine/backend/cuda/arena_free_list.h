// ArenaFreeList: first-fit sub-allocation of offsets inside one preallocated device chunk.
//
// The CUDA backend reserves device memory in large chunks (cudaMalloc once) and carves
// activation buffers and KV slabs out of them, so that admitting a sequence or allocating
// step scratch never calls cudaMalloc once the arena is warm. This class is only the offset
// bookkeeping (no CUDA), so host tests cover it. Offsets and sizes are multiples of
// kArenaAlignment (256 bytes: what cuBLASLt's heuristics assume and a multiple of every
// vector width the kernels use). Freed ranges coalesce with their free neighbours.
//
// Thread-safety: none; the backend serializes calls.
#ifndef DLLM_ENGINE_BACKEND_CUDA_ARENA_FREE_LIST_H_
#define DLLM_ENGINE_BACKEND_CUDA_ARENA_FREE_LIST_H_

#include <cstdint>
#include <iterator>
#include <map>
#include <optional>

namespace dllm {
namespace cuda {

inline constexpr int64_t kArenaAlignment = 256;

inline int64_t ArenaRoundUp(int64_t bytes) {
  if (bytes <= 0) return kArenaAlignment;
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

class ArenaFreeList {
 public:
  explicit ArenaFreeList(int64_t capacity_bytes)
      : capacity_(capacity_bytes / kArenaAlignment * kArenaAlignment) {
    if (capacity_ > 0) free_[0] = capacity_;
    free_bytes_ = capacity_;
  }

  // Offset of a free range of ArenaRoundUp(bytes) bytes (lowest suitable offset), or nullopt.
  std::optional<int64_t> Allocate(int64_t bytes) {
    const int64_t size = ArenaRoundUp(bytes);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < size) continue;
      const int64_t offset = it->first;
      const int64_t left = it->second - size;
      free_.erase(it);
      if (left > 0) free_[offset + size] = left;
      free_bytes_ -= size;
      return offset;
    }
    return std::nullopt;
  }

  // Returns [offset, offset + ArenaRoundUp(bytes)) to the free list.
  void Free(int64_t offset, int64_t bytes) {
    int64_t size = ArenaRoundUp(bytes);
    free_bytes_ += size;
    auto next = free_.lower_bound(offset);
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        size += prev->second;
        free_.erase(prev);
      }
    }
    if (next != free_.end() && offset + size == next->first) {
      size += next->second;
      free_.erase(next);
    }
    free_[offset] = size;
  }

  int64_t capacity_bytes() const { return capacity_; }
  int64_t free_bytes() const { return free_bytes_; }
  // Number of disjoint free ranges (1 when everything is free: full coalescing).
  int free_ranges() const { return static_cast<int>(free_.size()); }

 private:
  int64_t capacity_;
  int64_t free_bytes_ = 0;
  std::map<int64_t, int64_t> free_;  // offset -> size
};

}  // namespace cuda
}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_CUDA_ARENA_FREE_LIST_H_
