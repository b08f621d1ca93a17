// Parses the raw bytes of a request message, reporting invalid UTF-8 by field.
//
// proto3 `string` fields must hold UTF-8, and protobuf enforces it while parsing: left to
// gRPC, a prompt with one bad byte fails deserialization, the client gets UNIMPLEMENTED with
// an empty message, a raw "[libprotobuf ERROR]" line goes to stderr, and the call is never
// logged or counted. The service therefore takes Generate, GenerateStream and Tokenize as
// raw byte buffers and parses them here: string fields are first checked against the
// message's descriptor (walking the wire format, nested messages and repeated fields
// included), so the failure becomes INVALID_ARGUMENT naming the field, e.g.
// "chat.messages[1].content: is not valid UTF-8 (byte 17)". The published .proto keeps its
// `string` types, so no client changes.
//
// Thread-safety: pure functions.
#ifndef DLLM_SERVER_REQUEST_DECODING_H_
#define DLLM_SERVER_REQUEST_DECODING_H_

#include <google/protobuf/message.h>

#include <string_view>

#include "absl/status/status.h"

namespace dllm {

// OK, or INVALID_ARGUMENT naming the first string field (as a path) that is not UTF-8.
// Malformed wire data is not reported here (the parse that follows reports it).
absl::Status CheckStringFieldsUtf8(std::string_view wire, const google::protobuf::Descriptor& type);

// CheckStringFieldsUtf8, then parses `wire` into `out`; INVALID_ARGUMENT when either fails.
absl::Status ParseRequestBytes(std::string_view wire, google::protobuf::Message* out);

// True when `text` is well-formed UTF-8 (no overlong forms, surrogates or values above
// U+10FFFF); `*bad_offset` (optional) gets the offset of the first bad byte.
bool IsValidUtf8(std::string_view text, size_t* bad_offset = nullptr);

}  // namespace dllm

#endif  // DLLM_SERVER_REQUEST_DECODING_H_
