// BpeModel: byte-level BPE over a fixed vocabulary and ranked merge list.
//
// Encode() takes one pre-tokenised, byte-level-mapped piece, starts from its single
// characters and repeatedly applies the lowest-ranked merge (leftmost first on ties), the
// same procedure as HF tokenizers' Word::merge_all and the slow GPT-2/Qwen2 `bpe()`.
// With ignore_merges (Llama-3), a piece that is itself a vocabulary entry maps straight to
// that id. Characters missing from the vocabulary are dropped (no unk token in byte-level
// vocabularies). Results for short pieces are cached.
//
// Thread-safety: Encode may be called concurrently; the cache is guarded by a mutex.
#ifndef DLLM_ENGINE_TOKENIZER_BPE_MODEL_H_
#define DLLM_ENGINE_TOKENIZER_BPE_MODEL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace dllm {

class BpeModel {
 public:
  using Vocab = absl::flat_hash_map<std::string, int32_t>;
  using Merge = std::pair<std::string, std::string>;

  // `merges` are in rank order (rank = index). Errors: INVALID_ARGUMENT when an id is
  // negative or repeated, or a merge names a token (or produces one) that is not in `vocab`;
  // the message names the merge's index and token.
  static absl::StatusOr<std::unique_ptr<BpeModel>> Create(Vocab vocab,
                                                          const std::vector<Merge>& merges,
                                                          bool ignore_merges);

  // Appends the ids of `piece` (byte-level-mapped, valid UTF-8) to `ids`.
  void Encode(std::string_view piece, std::vector<int32_t>* ids) const;

  // Vocabulary lookups. TokenText is empty for ids outside the vocabulary.
  const std::string& TokenText(int32_t id) const;
  int32_t IdOf(std::string_view token) const;  // -1 if absent
  // One past the largest vocabulary id.
  int32_t id_limit() const { return static_cast<int32_t>(id_to_token_.size()); }
  size_t merge_count() const { return merges_.size(); }

 private:
  struct MergeTarget {
    int32_t rank;
    int32_t new_id;
  };
  static constexpr size_t kMaxCachedPieceBytes = 256;
  static constexpr size_t kMaxCacheEntries = 100000;

  BpeModel() = default;
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  void EncodeUncached(std::string_view piece, std::vector<int32_t>* ids) const;

  Vocab vocab_;
  std::vector<std::string> id_to_token_;
  absl::flat_hash_map<uint64_t, MergeTarget> merges_;
  // Ids of the one-character tokens for code points below 512 (covers the byte-level
  // alphabet), so the initial split needs no hashing; -1 if absent.
  std::array<int32_t, 512> small_char_ids_{};
  bool ignore_merges_ = false;

  mutable absl::Mutex cache_mutex_;
  mutable absl::flat_hash_map<std::string, std::vector<int32_t>> cache_
      ABSL_GUARDED_BY(cache_mutex_);
};

}  // namespace dllm

#endif  // DLLM_ENGINE_TOKENIZER_BPE_MODEL_H_
