#include "client/reflection_list.h"

#include <grpcpp/generic/generic_stub.h>

#include <chrono>
#include <optional>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

namespace dllm::client {
namespace {

// Minimal protobuf wire reader: length-delimited fields only (the rest are skipped).
class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}

  // Next field; false at the end or on malformed input (then ok() is false).
  bool Next(int* field, std::string_view* bytes) {
    while (pos_ < data_.size()) {
      std::optional<uint64_t> key = Varint();
      if (!key) return Fail();
      const int wire_type = static_cast<int>(*key & 7);
      *field = static_cast<int>(*key >> 3);
      if (wire_type == 0) {
        if (!Varint()) return Fail();
      } else if (wire_type == 1 || wire_type == 5) {
        const size_t n = wire_type == 1 ? 8 : 4;
        if (data_.size() - pos_ < n) return Fail();
        pos_ += n;
      } else if (wire_type == 2) {
        std::optional<uint64_t> length = Varint();
        if (!length || data_.size() - pos_ < *length) return Fail();
        *bytes = data_.substr(pos_, *length);
        pos_ += *length;
        return true;
      } else {
        return Fail();
      }
    }
    return false;
  }
  bool ok() const { return ok_; }

 private:
  std::optional<uint64_t> Varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64 && pos_ < data_.size(); shift += 7) {
      const uint8_t b = static_cast<uint8_t>(data_[pos_++]);
      value |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) return value;
    }
    return std::nullopt;
  }
  bool Fail() {
    ok_ = false;
    return false;
  }

  std::string_view data_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace

absl::StatusOr<std::vector<std::string>> ListServices(const Connection& connection,
                                                      double timeout_seconds) {
  // ServerReflectionRequest { string list_services = 7; } with the conventional "*".
  const std::string request = std::string("\x3a\x01*", 3);
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1);
  grpc::ByteBuffer response_buffer;
  grpc::ClientContext context;
  connection.Prepare(&context);
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000)));
  grpc::GenericStub stub(connection.channel());
  absl::Notification done;
  grpc::Status status;
  // A bidi-streaming method called with one request and one response.
  stub.UnaryCall(&context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                 grpc::StubOptions(), &request_buffer, &response_buffer, [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response_buffer.Dump(&slices).ok()) {
    for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  // ServerReflectionResponse.list_services_response = 6 → ListServiceResponse.service = 1
  // → ServiceResponse.name = 1.
  std::vector<std::string> names;
  WireReader top(bytes);
  int field = 0;
  std::string_view value;
  while (top.Next(&field, &value)) {
    if (field != 6) continue;
    WireReader list(value);
    std::string_view service;
    while (list.Next(&field, &service)) {
      if (field != 1) continue;
      WireReader entry(service);
      std::string_view name;
      while (entry.Next(&field, &name)) {
        if (field == 1) names.emplace_back(name);
      }
    }
  }
  if (!top.ok() || names.empty()) {
    return absl::DataLossError("unexpected server reflection reply");
  }
  return names;
}

}  // namespace dllm::client
