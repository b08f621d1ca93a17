// KvPool and KvSlab: per-sequence K/V storage carved from a byte budget.
//
// A sequence's slab is sized at admission (prompt + generation length is known up front) and
// holds, for every layer, K and V of every position: [layers][2][positions][kv_heads*head_dim].
// The memory lives on the backend. The pool only accounts bytes against its budget so the
// scheduler can ask "does this request fit?" before admitting it.
//
// Thread-safety: the pool's accounting is internally synchronized; a slab is used by one
// thread (the engine worker) at a time. A slab returns its bytes to the pool on destruction;
// the pool must outlive its slabs.
#ifndef DLLM_ENGINE_KV_KV_POOL_H_
#define DLLM_ENGINE_KV_KV_POOL_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/kv/kv_layout.h"

namespace dllm {

class Backend;
class DeviceBuffer;

class KvPool;

class KvSlab {
 public:
  ~KvSlab();
  KvSlab(const KvSlab&) = delete;
  KvSlab& operator=(const KvSlab&) = delete;

  int capacity_positions() const { return capacity_positions_; }
  // Whether the slab also holds every layer's input hidden states (KvLayout).
  bool has_hidden_states() const { return hidden_states_; }
  int64_t bytes() const { return bytes_; }
  DeviceBuffer& buffer() { return *buffer_; }

 private:
  friend class KvPool;
  KvSlab(KvPool* pool, std::unique_ptr<DeviceBuffer> buffer, int capacity_positions,
         bool hidden_states, int64_t bytes);
  KvPool* pool_;
  std::unique_ptr<DeviceBuffer> buffer_;
  int capacity_positions_;
  bool hidden_states_;
  int64_t bytes_;
};

class KvPool {
 public:
  // `backend` is not owned and must outlive the pool.
  KvPool(Backend* backend, const KvLayout& layout, int64_t budget_bytes);

  // Bytes a slab of `positions` positions takes from the budget, with or without hidden
  // states, plus `host_bytes` that its sequence holds elsewhere (a cache policy's state,
  // PolicyStateBytes): those are counted against the budget but not allocated here.
  int64_t BytesFor(int positions, bool hidden_states = false, int64_t host_bytes = 0) const;
  bool Fits(int positions, bool hidden_states = false, int64_t host_bytes = 0) const;
  // RESOURCE_EXHAUSTED when the budget cannot hold it.
  absl::StatusOr<std::unique_ptr<KvSlab>> Allocate(int positions, bool hidden_states = false,
                                                   int64_t host_bytes = 0);
  const KvLayout& layout() const { return layout_; }

  int64_t budget_bytes() const { return budget_bytes_; }
  int64_t used_bytes() const;
  double usage_ratio() const;

 private:
  friend class KvSlab;
  void Release(int64_t bytes);

  Backend* backend_;
  KvLayout layout_;
  int64_t budget_bytes_;
  mutable absl::Mutex mu_;
  int64_t used_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_KV_KV_POOL_H_
