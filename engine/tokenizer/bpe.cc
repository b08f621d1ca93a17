#include "engine/tokenizer/bpe.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/utf8.h"

namespace dllm {

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::Create(BpeTokenizerParts parts) {
  if (parts.model == nullptr) return absl::InvalidArgumentError("tokenizer has no BPE model");
  std::vector<AddedToken> raw;
  std::vector<AddedToken> normalized;
  for (const AddedToken& token : parts.added_tokens) {
    (token.normalized && !parts.normalizer.is_identity() ? normalized : raw).push_back(token);
  }
  absl::StatusOr<AddedTokenSet> raw_set = AddedTokenSet::Create(std::move(raw));
  if (!raw_set.ok()) return raw_set.status();
  absl::StatusOr<AddedTokenSet> normalized_set = AddedTokenSet::Create(std::move(normalized));
  if (!normalized_set.ok()) return normalized_set.status();

  auto tokenizer = std::unique_ptr<BpeTokenizer>(new BpeTokenizer(std::move(parts)));
  tokenizer->model_ = tokenizer->parts_.model.get();
  tokenizer->raw_added_ = std::move(*raw_set);
  tokenizer->normalized_added_ = std::move(*normalized_set);
  int32_t size = tokenizer->model_->id_limit();
  for (const AddedToken& token : tokenizer->parts_.added_tokens) {
    const auto [it, inserted] = tokenizer->added_by_id_.emplace(token.id, &token);
    if (!inserted && it->second->content != token.content) {
      return absl::InvalidArgumentError(absl::StrCat("added token id ", token.id,
                                                     " is given to both \"", it->second->content,
                                                     "\" and \"", token.content, "\""));
    }
    tokenizer->added_by_content_.emplace(token.content, token.id);
    size = std::max(size, token.id + 1);
  }
  tokenizer->size_ = size;
  return tokenizer;
}

std::vector<int32_t> BpeTokenizer::Encode(std::string_view text,
                                          std::span<const TextRange> text_only) const {
  std::string repaired;
  if (!IsValidUtf8(text)) {
    // Repair changes byte offsets: then every byte is text only (the chat template's own
    // text is valid UTF-8, so this only happens to raw prompts, which have no ranges).
    repaired = ToValidUtf8(text);
    text = repaired;
  }
  const TextRange everything{0, text.size()};
  if (!repaired.empty() && !text_only.empty())
    text_only = std::span<const TextRange>(&everything, 1);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  for (const AddedTokenSet::Segment& segment : raw_added_.Split(text, text_only)) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
      continue;
    }
    // Normalizing moves offsets: a plain segment touching untrusted text matches no special
    // tokens at all (the template's own ones were all matched above).
    const size_t at = static_cast<size_t>(segment.text.data() - text.data());
    const bool untrusted = std::any_of(text_only.begin(), text_only.end(), [&](const TextRange& r) {
      return r.Overlaps(at, at + segment.text.size());
    });
    const std::string normalized = parts_.normalizer.Normalize(segment.text);
    const TextRange whole{0, normalized.size()};
    for (const AddedTokenSet::Segment& inner :
         normalized_added_.Split(normalized, untrusted ? std::span<const TextRange>(&whole, 1)
                                                       : std::span<const TextRange>())) {
      if (inner.id >= 0) {
        ids.push_back(inner.id);
      } else {
        EncodeNormalized(inner.text, &ids);
      }
    }
  }
  return ids;
}

void BpeTokenizer::EncodeNormalized(std::string_view text, std::vector<int32_t>* ids) const {
  for (const std::string& piece : parts_.pre_tokenizer.Split(text)) model_->Encode(piece, ids);
}

bool BpeTokenizer::AppendTokenBytes(int32_t id, bool skip_special, std::string* out) const {
  if (const auto it = added_by_id_.find(id); it != added_by_id_.end()) {
    if (skip_special && it->second->special) return false;
    out->append(it->second->content);
    return true;
  }
  const std::string& text = model_->TokenText(id);
  if (text.empty()) return false;
  // As HF's ByteLevel decoder: a token outside the byte alphabet is taken as it is.
  if (!byte_map_.Decode(text, out)) out->append(text);
  return true;
}

std::string BpeTokenizer::Decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  for (const int32_t id : ids) AppendTokenBytes(id, skip_special, &bytes);
  return IsValidUtf8(bytes) ? bytes : ToValidUtf8(bytes);
}

std::string BpeTokenizer::TokenBytes(int32_t id) const {
  std::string bytes;
  AppendTokenBytes(id, /*skip_special=*/false, &bytes);
  return bytes;
}

std::optional<int32_t> BpeTokenizer::TokenToId(std::string_view token) const {
  if (const auto it = added_by_content_.find(AbslView(token)); it != added_by_content_.end()) {
    return it->second;
  }
  const int32_t id = model_->IdOf(token);
  if (id < 0) return std::nullopt;
  return id;
}

bool BpeTokenizer::IsSpecial(int32_t id) const {
  const auto it = added_by_id_.find(id);
  return it != added_by_id_.end() && it->second->special;
}

}  // namespace dllm
