#include "engine/core/model_family.h"

namespace dllm {

std::string_view ModelFamilyName(ModelFamily family) {
  switch (family) {
    case ModelFamily::kLlada:
      return "LLaDA";
    case ModelFamily::kDream:
      return "Dream";
  }
  return "?";
}

}  // namespace dllm
