#include "server/request_decoding.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <map>
#include <string>

#include "absl/strings/str_cat.h"

namespace dllm {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;

constexpr int kMaxDepth = 32;

// Walks one message. Returns false on malformed wire data (left to the real parser);
// sets *error on the first invalid string.
bool Walk(google::protobuf::io::CodedInputStream* in, const Descriptor& type,
          const std::string& path, int depth, absl::Status* error) {
  if (depth > kMaxDepth) return false;
  std::map<int, int> repeated_index;  // field number -> elements seen (for "[i]" in paths)
  while (true) {
    const uint32_t tag = in->ReadTag();
    if (tag == 0) return true;  // end of input (or of a length limit)
    const int number = static_cast<int>(WireFormatLite::GetTagFieldNumber(tag));
    const FieldDescriptor* field = type.FindFieldByNumber(number);
    const bool delimited =
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    if (field == nullptr || !delimited ||
        (field->type() != FieldDescriptor::TYPE_STRING &&
         field->type() != FieldDescriptor::TYPE_MESSAGE)) {
      if (!WireFormatLite::SkipField(in, tag)) return false;
      continue;
    }
    std::string name = path.empty() ? field->name() : absl::StrCat(path, ".", field->name());
    if (field->is_repeated()) {
      name = absl::StrCat(name, "[", repeated_index[number]++, "]");
    }
    uint32_t length = 0;
    if (!in->ReadVarint32(&length)) return false;
    if (field->type() == FieldDescriptor::TYPE_STRING) {
      std::string value;
      if (!in->ReadString(&value, static_cast<int>(length))) return false;
      size_t bad = 0;
      if (!IsValidUtf8(value, &bad)) {
        *error = absl::InvalidArgumentError(
            absl::StrCat(name, ": is not valid UTF-8 (byte ", bad, " of ", value.size(), ")"));
        return true;
      }
      continue;
    }
    const auto limit = in->PushLimit(static_cast<int>(length));
    if (!Walk(in, *field->message_type(), name, depth + 1, error)) return false;
    if (!error->ok()) return true;
    if (!in->ConsumedEntireMessage() && in->BytesUntilLimit() != 0) return false;
    in->PopLimit(limit);
  }
}

}  // namespace

bool IsValidUtf8(std::string_view text, size_t* bad_offset) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    int extra = 0;
    uint32_t min = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      extra = 1, min = 0x80, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2, min = 0x800, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3, min = 0x10000, cp = c & 0x07;
    } else {
      if (bad_offset != nullptr) *bad_offset = i;
      return false;
    }
    bool ok = i + extra < n;
    for (int k = 1; ok && k <= extra; ++k) {
      ok = (s[i + k] & 0xc0) == 0x80;
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    if (!ok || cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      if (bad_offset != nullptr) *bad_offset = i;
      return false;
    }
    i += static_cast<size_t>(extra) + 1;
  }
  return true;
}

absl::Status CheckStringFieldsUtf8(std::string_view wire, const Descriptor& type) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(wire.data()),
                                            static_cast<int>(wire.size()));
  absl::Status error;
  Walk(&in, type, "", 0, &error);
  return error;
}

absl::Status ParseRequestBytes(std::string_view wire, google::protobuf::Message* out) {
  const Descriptor& type = *out->GetDescriptor();
  if (absl::Status st = CheckStringFieldsUtf8(wire, type); !st.ok()) return st;
  if (!out->ParseFromArray(wire.data(), static_cast<int>(wire.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("request: the bytes are not a valid ", type.full_name(), " message"));
  }
  return absl::OkStatus();
}

}  // namespace dllm
