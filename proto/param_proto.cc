#include "proto/param_proto.h"

#include <cctype>

#include "absl/strings/str_cat.h"

namespace dllm {
namespace {

using google::protobuf::EnumDescriptor;
using google::protobuf::EnumValueDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

const google::protobuf::Descriptor* MessageOf(ParamSection section) {
  return section == ParamSection::kDecoding ? v1::DecodingOptions::descriptor()
                                            : v1::CacheOptions::descriptor();
}

// "SCHEDULE_" for Schedule: the UNSPECIFIED value's name without "UNSPECIFIED".
std::string Prefix(const EnumDescriptor& type) {
  const std::string& zero = type.value(0)->name();
  constexpr absl::string_view kUnspecified = "UNSPECIFIED";
  if (zero.size() < kUnspecified.size()) return "";
  return zero.substr(0, zero.size() - kUnspecified.size());
}

}  // namespace

const FieldDescriptor* ProtoFieldOf(const ParamField& field) {
  return MessageOf(field.section)->FindFieldByName(std::string(field.name));
}

std::string EngineEnumName(const EnumValueDescriptor& value) {
  std::string name = value.name().substr(Prefix(*value.type()).size());
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

const EnumValueDescriptor* ProtoEnumValue(const EnumDescriptor& type,
                                          absl::string_view engine_name) {
  std::string name = Prefix(type);
  for (char c : engine_name) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const EnumValueDescriptor* value = type.FindValueByName(name);
  return value != nullptr && value->number() != 0 ? value : nullptr;
}

absl::StatusOr<std::optional<ParamValue>> GetProtoParam(const ParamField& field,
                                                        const v1::DecodingOptions& decoding,
                                                        const v1::CacheOptions& cache) {
  const FieldDescriptor* fd = ProtoFieldOf(field);
  const Message& m = field.section == ParamSection::kDecoding
                         ? static_cast<const Message&>(decoding)
                         : static_cast<const Message&>(cache);
  if (fd == nullptr) return std::optional<ParamValue>();
  const Reflection* r = m.GetReflection();
  if (!r->HasField(m, fd)) return std::optional<ParamValue>();  // enums: HasField = not 0
  switch (fd->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return std::optional<ParamValue>(int64_t{r->GetInt32(m, fd)});
    case FieldDescriptor::CPPTYPE_UINT64:
      return std::optional<ParamValue>(r->GetUInt64(m, fd));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return std::optional<ParamValue>(static_cast<double>(r->GetFloat(m, fd)));
    case FieldDescriptor::CPPTYPE_ENUM: {
      const int number = r->GetEnumValue(m, fd);
      const EnumValueDescriptor* value = fd->enum_type()->FindValueByNumber(number);
      if (value != nullptr) {
        const std::string name = EngineEnumName(*value);
        for (size_t i = 0; i < field.choices.size(); ++i) {
          if (field.choices[i] == name) return std::optional<ParamValue>(static_cast<int64_t>(i));
        }
      }
      return absl::InvalidArgumentError(absl::StrCat(field.FullName(), ": unknown value ", number));
    }
    default:
      return absl::InternalError(absl::StrCat(field.FullName(), ": unsupported proto type"));
  }
}

void SetProtoParam(const ParamField& field, const ParamValue& value, v1::DecodingOptions* decoding,
                   v1::CacheOptions* cache) {
  const FieldDescriptor* fd = ProtoFieldOf(field);
  if (fd == nullptr) return;
  Message* m = field.section == ParamSection::kDecoding ? static_cast<Message*>(decoding)
                                                        : static_cast<Message*>(cache);
  const Reflection* r = m->GetReflection();
  switch (fd->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      r->SetInt32(m, fd, static_cast<int32_t>(std::get<int64_t>(value)));
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      r->SetUInt64(m, fd, std::get<uint64_t>(value));
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      r->SetFloat(m, fd, static_cast<float>(std::get<double>(value)));
      break;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const std::string name = FormatParamValue(field, value);
      if (const EnumValueDescriptor* v = ProtoEnumValue(*fd->enum_type(), name)) {
        r->SetEnumValue(m, fd, v->number());
      }
      break;
    }
    default:
      break;
  }
}

absl::StatusOr<ParamOverrides> ReadProtoParams(const v1::DecodingOptions& decoding,
                                               const v1::CacheOptions& cache) {
  ParamOverrides out;
  for (const ParamField& field : ParamFields()) {
    absl::StatusOr<std::optional<ParamValue>> value = GetProtoParam(field, decoding, cache);
    if (!value.ok()) return value.status();
    if (*value) out.Set(field, **value);
  }
  return out;
}

void WriteProtoParams(const DecodingParams& params_decoding, const CacheParams& params_cache,
                      v1::DecodingOptions* decoding, v1::CacheOptions* cache) {
  for (const ParamField& field : ParamFields()) {
    if (std::optional<ParamValue> value = field.get(params_decoding, params_cache)) {
      SetProtoParam(field, *value, decoding, cache);
    }
  }
}

}  // namespace dllm
