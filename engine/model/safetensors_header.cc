#include "engine/model/safetensors_header.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace dllm {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

using Json = nlohmann::json;

// Root object (0), tensor entry (1), shape / data_offsets arrays (2). Anything deeper is not
// safetensors and is refused before it can cost memory.
constexpr int kMaxJsonContainerDepth = 2;

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// A short, printable rendering of a JSON value for error messages.
std::string Describe(const Json& value) {
  std::string text =
      value.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

// absl 20220623 (Debian) has its own string_view type; std::string_view must be converted.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status TensorError(absl::string_view file, absl::string_view tensor, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": tensor '", tensor, "': ", what));
}

absl::StatusOr<SafetensorsTensorInfo> ParseEntry(const std::string& name, const Json& entry,
                                                 const SafetensorsHeader& header,
                                                 absl::string_view file) {
  if (name.empty()) return TensorError(file, name, "empty tensor name");
  if (!entry.is_object()) {
    return TensorError(file, name,
                       absl::StrCat("entry must be a JSON object, got ", Describe(entry)));
  }
  SafetensorsTensorInfo info;
  info.name = name;

  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string()) {
    return TensorError(file, name, "missing or non-string \"dtype\"");
  }
  auto dtype = ParseSafetensorsDType(dtype_it->get_ref<const std::string&>());
  if (!dtype.ok()) return TensorError(file, name, dtype.status().message());
  info.dtype = *dtype;

  auto shape_it = entry.find("shape");
  if (shape_it == entry.end() || !shape_it->is_array()) {
    return TensorError(file, name, "missing or non-array \"shape\"");
  }
  // Element count in the same order TensorView::NumElements multiplies, so that a shape
  // accepted here can never overflow there.
  uint64_t elements = 1;
  for (const Json& dim : *shape_it) {
    if (!dim.is_number_unsigned()) {
      return TensorError(
          file, name,
          absl::StrCat("shape dimension ", Describe(dim), " is not a non-negative integer"));
    }
    const uint64_t d = dim.get<uint64_t>();
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return TensorError(file, name, absl::StrCat("shape dimension ", d, " is too large"));
    }
    info.shape.push_back(static_cast<int64_t>(d));
    if (__builtin_mul_overflow(elements, d, &elements) ||
        elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return TensorError(file, name, "element count of the shape overflows 64 bits");
    }
  }
  uint64_t expected_bytes = 0;
  if (__builtin_mul_overflow(elements, static_cast<uint64_t>(DTypeSize(info.dtype)),
                             &expected_bytes)) {
    return TensorError(file, name, "byte size of the shape overflows 64 bits");
  }

  auto offsets_it = entry.find("data_offsets");
  if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
      !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned()) {
    return TensorError(file, name,
                       "\"data_offsets\" must be an array of two non-negative integers");
  }
  const uint64_t begin = (*offsets_it)[0].get<uint64_t>();
  const uint64_t end = (*offsets_it)[1].get<uint64_t>();
  if (end < begin) {
    return TensorError(file, name,
                       absl::StrCat("data_offsets [", begin, ", ", end, "] end before begin"));
  }
  if (end > header.data_bytes) {
    return TensorError(
        file, name,
        absl::StrCat("data_offsets [", begin, ", ", end, "] run past the data section of ",
                     header.data_bytes, " bytes (file truncated or header corrupt)"));
  }
  if (end - begin != expected_bytes) {
    return TensorError(file, name,
                       absl::StrCat("data_offsets [", begin, ", ", end, "] hold ", end - begin,
                                    " bytes but shape ", ShapeString(info.shape), " of ",
                                    Av(DTypeName(info.dtype)), " needs ", expected_bytes));
  }
  info.file_begin = header.data_offset + begin;  // no overflow: both are <= file size
  info.file_end = header.data_offset + end;
  // No alignment requirement: some writers (MLX exports, hand-rolled uploads) pack tensors
  // at odd offsets and Hugging Face's loader accepts them; every reader copies bytes with
  // memcpy or byte loads (TensorView::bytes carries no alignment promise).
  return info;
}

}  // namespace

absl::StatusOr<DType> ParseSafetensorsDType(std::string_view name) {
  if (name == "BF16") return DType::kBF16;
  if (name == "F16") return DType::kF16;
  if (name == "F32") return DType::kF32;
  std::string printable(name.substr(0, 32));
  for (char& c : printable) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return absl::InvalidArgumentError(
      absl::StrCat("dtype \"", printable, "\" is not supported (supported: BF16, F16, F32)"));
}

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(std::span<const uint8_t> file_bytes,
                                                         std::string_view file_name) {
  return ParseSafetensorsHeader(file_bytes, file_bytes.size(), file_name);
}

uint64_t SafetensorsHeaderPrefixBytes(std::span<const uint8_t> length_bytes, uint64_t file_size) {
  if (length_bytes.size() < 8 || file_size < 8) return std::min<uint64_t>(file_size, 8);
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, length_bytes.data(), 8);
  return 8 + std::min({header_bytes, kMaxSafetensorsHeaderBytes, file_size - 8});
}

namespace {

// The 8-byte length prefix against the file and the bytes at hand: the header's length.
absl::StatusOr<uint64_t> HeaderLength(std::span<const uint8_t> file_bytes, uint64_t file_size,
                                      absl::string_view file_name) {
  if (file_bytes.size() > file_size || file_bytes.size() < std::min<uint64_t>(file_size, 8)) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": header prefix of ",
                                                   file_bytes.size(), " bytes for a ", file_size,
                                                   "-byte file"));
  }
  if (file_size < 8) {
    return absl::DataLossError(absl::StrCat(file_name, ": file is ", file_size,
                                            " bytes, too short for a safetensors header"));
  }
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, file_bytes.data(), 8);  // little-endian (static_assert above)
  if (header_bytes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": safetensors header length ", header_bytes, " is too small"));
  }
  if (header_bytes > kMaxSafetensorsHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        file_name, ": safetensors header length ", header_bytes, " exceeds the ",
        kMaxSafetensorsHeaderBytes, "-byte limit (corrupt, or not a safetensors file)"));
  }
  if (header_bytes > file_size - 8) {
    return absl::DataLossError(absl::StrCat(file_name, ": safetensors header length ", header_bytes,
                                            " runs past the end of the ", file_size,
                                            "-byte file (truncated?)"));
  }
  if (file_bytes.size() < 8 + header_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": header prefix of ",
                                                   file_bytes.size(), " bytes is shorter than the ",
                                                   8 + header_bytes, " bytes the header declares"));
  }
  return header_bytes;
}

// The header's JSON object, bounded in depth, with no top-level key listed twice.
absl::StatusOr<Json> HeaderJson(const char* text, uint64_t header_bytes,
                                absl::string_view file_name) {
  bool too_deep = false;
  std::string duplicate_key;
  std::set<std::string> seen_keys;
  Json::parser_callback_t callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth > kMaxJsonContainerDepth) {
      too_deep = true;
      return false;
    }
    if (event == Json::parse_event_t::key && depth == 1 && duplicate_key.empty() &&
        parsed.is_string() && !seen_keys.insert(parsed.get<std::string>()).second) {
      duplicate_key = parsed.get<std::string>();
    }
    return true;
  };
  Json root;
  try {
    root = Json::parse(text, text + header_bytes, callback);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": safetensors header is not valid JSON: ", e.what()));
  }
  if (too_deep) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": safetensors header JSON is nested too deeply"));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": safetensors header must be a JSON object"));
  }
  if (!duplicate_key.empty()) {
    return TensorError(file_name, duplicate_key, "listed twice in the header");
  }
  return root;
}

// The "__metadata__" strings and every tensor entry of the header object.
absl::Status ReadEntries(const Json& root, absl::string_view file_name, SafetensorsHeader* header) {
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) {
        return absl::InvalidArgumentError(
            absl::StrCat(file_name, ": \"__metadata__\" must be an object of strings"));
      }
      for (const auto& [meta_key, meta_value] : value.items()) {
        if (!meta_value.is_string()) {
          return absl::InvalidArgumentError(absl::StrCat(
              file_name, ": \"__metadata__\" value for \"", meta_key, "\" is not a string"));
        }
        header->metadata.emplace(meta_key, meta_value.get<std::string>());
      }
      continue;
    }
    auto info = ParseEntry(key, value, *header, file_name);
    if (!info.ok()) return info.status();
    header->tensors.push_back(*std::move(info));
  }
  // Json objects iterate in key order, so `tensors` is already sorted by name.
  return absl::OkStatus();
}

// Overlap check over non-empty ranges, in file order.
absl::Status CheckNoOverlap(const SafetensorsHeader& header, absl::string_view file_name) {
  std::vector<const SafetensorsTensorInfo*> by_offset;
  by_offset.reserve(header.tensors.size());
  for (const auto& t : header.tensors) {
    if (t.file_end > t.file_begin) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return a->file_begin != b->file_begin ? a->file_begin < b->file_begin : a->name < b->name;
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const auto* prev = by_offset[i - 1];
    const auto* cur = by_offset[i];
    if (cur->file_begin < prev->file_end) {
      return TensorError(file_name, cur->name,
                         absl::StrCat("data overlaps tensor '", prev->name, "' (file bytes [",
                                      cur->file_begin, ", ", cur->file_end, ") vs [",
                                      prev->file_begin, ", ", prev->file_end, "))"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(std::span<const uint8_t> file_bytes,
                                                         uint64_t file_size,
                                                         std::string_view file_name_std) {
  const absl::string_view file_name = Av(file_name_std);
  absl::StatusOr<uint64_t> header_bytes = HeaderLength(file_bytes, file_size, file_name);
  if (!header_bytes.ok()) return header_bytes.status();
  SafetensorsHeader header;
  header.header_bytes = *header_bytes;
  header.data_offset = 8 + *header_bytes;
  header.data_bytes = file_size - header.data_offset;
  const char* text = reinterpret_cast<const char*>(file_bytes.data() + 8);
  absl::StatusOr<Json> root = HeaderJson(text, *header_bytes, file_name);
  if (!root.ok()) return root.status();
  if (absl::Status st = ReadEntries(*root, file_name, &header); !st.ok()) return st;
  if (absl::Status st = CheckNoOverlap(header, file_name); !st.ok()) return st;
  return header;
}

}  // namespace dllm
