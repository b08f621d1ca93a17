#include "engine/kv/kv_pool.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/backend/backend.h"

namespace dllm {

KvSlab::KvSlab(KvPool* pool, std::unique_ptr<DeviceBuffer> buffer, int capacity_positions,
               bool hidden_states, int64_t bytes)
    : pool_(pool),
      buffer_(std::move(buffer)),
      capacity_positions_(capacity_positions),
      hidden_states_(hidden_states),
      bytes_(bytes) {}

KvSlab::~KvSlab() {
  buffer_.reset();  // free the memory before the bytes become available to others
  pool_->Release(bytes_);
}

KvPool::KvPool(Backend* backend, const KvLayout& layout, int64_t budget_bytes)
    : backend_(backend), layout_(layout), budget_bytes_(budget_bytes) {}

namespace {
int64_t DeviceBytes(const KvLayout& layout, const Backend& backend, int positions,
                    bool hidden_states) {
  if (positions <= 0) return 0;
  return layout.SlabElements(positions, hidden_states) * backend.kv_bytes_per_element();
}
}  // namespace

int64_t KvPool::BytesFor(int positions, bool hidden_states, int64_t host_bytes) const {
  if (positions <= 0) return 0;
  return DeviceBytes(layout_, *backend_, positions, hidden_states) + host_bytes;
}

bool KvPool::Fits(int positions, bool hidden_states, int64_t host_bytes) const {
  const int64_t need = BytesFor(positions, hidden_states, host_bytes);
  absl::MutexLock lock(&mu_);
  return positions > 0 && used_bytes_ + need <= budget_bytes_;
}

absl::StatusOr<std::unique_ptr<KvSlab>> KvPool::Allocate(int positions, bool hidden_states,
                                                         int64_t host_bytes) {
  if (positions <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV slab needs a positive number of positions, got ", positions));
  }
  const int64_t need = BytesFor(positions, hidden_states, host_bytes);
  {
    absl::MutexLock lock(&mu_);
    if (used_bytes_ + need > budget_bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "KV cache budget exhausted: ", positions, " positions need ", need, " bytes, ",
          budget_bytes_ - used_bytes_, " of ", budget_bytes_, " bytes free"));
    }
    used_bytes_ += need;  // reserve before allocating so concurrent Fits() see it
  }
  auto buffer = backend_->Allocate(DeviceBytes(layout_, *backend_, positions, hidden_states));
  if (!buffer.ok()) {
    Release(need);
    return buffer.status();
  }
  return std::unique_ptr<KvSlab>(
      new KvSlab(this, std::move(*buffer), positions, hidden_states, need));
}

int64_t KvPool::used_bytes() const {
  absl::MutexLock lock(&mu_);
  return used_bytes_;
}

double KvPool::usage_ratio() const {
  if (budget_bytes_ <= 0) return 1.0;
  return static_cast<double>(used_bytes()) / static_cast<double>(budget_bytes_);
}

void KvPool::Release(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  used_bytes_ -= bytes;
}

}  // namespace dllm
