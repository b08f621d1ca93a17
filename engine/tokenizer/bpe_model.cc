#include "engine/tokenizer/bpe_model.h"

#include <queue>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/utf8.h"

namespace dllm {
namespace {

// One symbol of the word being merged, in a doubly linked list over a vector.
struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  int32_t length_bytes;  // 0 once merged into its left neighbour
};

struct PendingMerge {
  int32_t pos;
  int32_t rank;
  int32_t new_id;
  // std::priority_queue is a max-heap: "greater" means lower rank, then lower position.
  bool operator<(const PendingMerge& other) const {
    if (rank != other.rank) return rank > other.rank;
    return pos > other.pos;
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::Create(Vocab vocab,
                                                           const std::vector<Merge>& merges,
                                                           bool ignore_merges) {
  auto model = std::unique_ptr<BpeModel>(new BpeModel());
  int32_t max_id = -1;
  for (const auto& [token, id] : vocab) {
    if (id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("vocab entry \"", token, "\" has negative id ", id));
    }
    max_id = std::max(max_id, id);
  }
  // BPE vocabularies are dense; a far-out id is a broken file, not a reason to allocate
  // gigabytes for the id → token table.
  const int64_t max_dense_id = static_cast<int64_t>(vocab.size()) * 2 + 65536;
  if (max_id > max_dense_id) {
    return absl::InvalidArgumentError(absl::StrCat("vocab id ", max_id, " is far above the ",
                                                   vocab.size(), " entries of the vocabulary"));
  }
  model->id_to_token_.resize(static_cast<size_t>(max_id) + 1);
  std::vector<bool> seen(model->id_to_token_.size(), false);
  for (const auto& [token, id] : vocab) {
    if (seen[id]) {
      return absl::InvalidArgumentError(absl::StrCat("vocab id ", id, " is used by both \"",
                                                     model->id_to_token_[id], "\" and \"", token,
                                                     "\""));
    }
    seen[id] = true;
    model->id_to_token_[id] = token;
  }
  model->small_char_ids_.fill(-1);
  for (const auto& [token, id] : vocab) {
    const size_t len = token.empty() ? 0 : ValidUtf8SequenceLength(token, 0);
    if (len != 0 && len == token.size()) {
      const char32_t cp = DecodeUtf8At(token, 0, len);
      if (cp < model->small_char_ids_.size()) model->small_char_ids_[cp] = id;
    }
  }
  model->vocab_ = std::move(vocab);
  model->ignore_merges_ = ignore_merges;

  model->merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const int32_t left_id = model->IdOf(left);
    const int32_t right_id = model->IdOf(right);
    for (const auto* part : {&left, &right}) {
      if (model->IdOf(*part) < 0) {
        return absl::InvalidArgumentError(absl::StrCat("merge #", rank, " (\"", left, " ", right,
                                                       "\") uses token \"", *part,
                                                       "\" which is not in the vocabulary"));
      }
    }
    joined.assign(left).append(right);
    const int32_t new_id = model->IdOf(joined);
    if (new_id < 0) {
      return absl::InvalidArgumentError(absl::StrCat("merge #", rank, " (\"", left, " ", right,
                                                     "\") produces \"", joined,
                                                     "\" which is not in the vocabulary"));
    }
    // A repeated pair keeps its last rank, as HF tokenizers and the slow tokenizer do.
    model->merges_.insert_or_assign(PairKey(left_id, right_id),
                                    MergeTarget{static_cast<int32_t>(rank), new_id});
  }
  return model;
}

const std::string& BpeModel::TokenText(int32_t id) const {
  static const std::string* const kEmpty = new std::string();
  if (id < 0 || id >= id_limit()) return *kEmpty;
  return id_to_token_[id];
}

int32_t BpeModel::IdOf(std::string_view token) const {
  const auto it = vocab_.find(AbslView(token));
  return it == vocab_.end() ? -1 : it->second;
}

void BpeModel::Encode(std::string_view piece, std::vector<int32_t>* ids) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    if (const int32_t id = IdOf(piece); id >= 0) {
      ids->push_back(id);
      return;
    }
  }
  const bool cacheable = piece.size() <= kMaxCachedPieceBytes;
  if (cacheable) {
    absl::ReaderMutexLock lock(&cache_mutex_);
    const auto it = cache_.find(AbslView(piece));
    if (it != cache_.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = ids->size();
  EncodeUncached(piece, ids);
  if (cacheable) {
    absl::MutexLock lock(&cache_mutex_);
    // The cache stops growing when full: bounded memory matters more than the hit rate on
    // a long-running server, and common pieces are cached early.
    if (cache_.size() < kMaxCacheEntries) {
      cache_.try_emplace(std::string(piece), ids->begin() + static_cast<ptrdiff_t>(first),
                         ids->end());
    }
  }
}

void BpeModel::EncodeUncached(std::string_view piece, std::vector<int32_t>* ids) const {
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  for (size_t pos = 0; pos < piece.size();) {
    size_t len = ValidUtf8SequenceLength(piece, pos);
    if (len == 0) len = 1;  // not reached for byte-level pieces; keeps the loop total
    int32_t id = -1;
    const char32_t cp = DecodeUtf8At(piece, pos, len);
    if (cp < small_char_ids_.size()) {
      id = small_char_ids_[cp];
    } else {
      id = IdOf(piece.substr(pos, len));
    }
    if (id >= 0) {
      const auto index = static_cast<int32_t>(symbols.size());
      symbols.push_back({id, index - 1, index + 1, static_cast<int32_t>(len)});
    }
    pos += len;
  }
  if (symbols.empty()) return;
  // Dropped characters can leave gaps; relink so the list is contiguous.
  const auto count = static_cast<int32_t>(symbols.size());
  for (int32_t i = 0; i < count; ++i) {
    symbols[i].prev = i - 1;
    symbols[i].next = i + 1 < count ? i + 1 : -1;
  }

  std::priority_queue<PendingMerge> queue;
  auto push_if_mergeable = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    const auto it = merges_.find(PairKey(symbols[pos].id, symbols[next].id));
    if (it != merges_.end()) queue.push({pos, it->second.rank, it->second.new_id});
  };
  for (int32_t i = 0; i + 1 < count; ++i) push_if_mergeable(i);

  while (!queue.empty()) {
    const PendingMerge top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (left.length_bytes == 0 || left.next < 0) continue;
    const int32_t right_pos = left.next;
    Symbol& right = symbols[right_pos];
    // Skip entries made stale by an earlier merge of either symbol.
    const auto it = merges_.find(PairKey(left.id, right.id));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;
    left.id = top.new_id;
    left.length_bytes += right.length_bytes;
    left.next = right.next;
    right.length_bytes = 0;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    if (left.prev >= 0) push_if_mergeable(left.prev);
    push_if_mergeable(top.pos);
  }
  for (const Symbol& s : symbols) {
    if (s.length_bytes != 0) ids->push_back(s.id);
  }
}

}  // namespace dllm
