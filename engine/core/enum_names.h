// EnumNames: the spellings of an enum as a table of {value, name} rows, and lookups both
// ways. One helper for every enum that text names: the request enums (params.cc) and the
// server config's (backend, log level and format).
//
// Thread-safety: pure functions over constant tables.
#ifndef DLLM_ENGINE_CORE_ENUM_NAMES_H_
#define DLLM_ENGINE_CORE_ENUM_NAMES_H_

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace dllm {

template <typename E>
struct EnumName {
  E value;
  const char* name;  // a static string
};

// The name of `value`, or "?" when the table has no row for it.
template <typename E, size_t N>
const char* NameOf(const std::array<EnumName<E>, N>& table, E value) {
  for (const auto& row : table) {
    if (row.value == value) return row.name;
  }
  return "?";
}

// The value named `name`, or nullopt.
template <typename E, size_t N>
std::optional<E> ValueOf(const std::array<EnumName<E>, N>& table, std::string_view name) {
  for (const auto& row : table) {
    if (name == row.name) return row.value;
  }
  return std::nullopt;
}

// Every name in table order, joined by '|' ("cpu|cuda"), for messages.
template <typename E, size_t N>
std::string JoinedNames(const std::array<EnumName<E>, N>& table) {
  std::string out;
  for (const auto& row : table) {
    if (!out.empty()) out += '|';
    out += row.name;
  }
  return out;
}

}  // namespace dllm

#endif  // DLLM_ENGINE_CORE_ENUM_NAMES_H_
