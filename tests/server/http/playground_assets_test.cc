#include "server/http/playground_assets.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace dllm {
namespace {

std::string ReadSource(const std::string& name) {
  std::ifstream in(std::string(DLLM_SOURCE_DIR) + "/server/http/playground/" + name,
                   std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST_CASE("playground assets: every source file compiled in, byte for byte") {
  std::set<std::string> on_disk;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(DLLM_SOURCE_DIR) +
                                                               "/server/http/playground")) {
    const std::string ext = entry.path().extension();
    if (ext == ".html" || ext == ".css" || ext == ".js") on_disk.insert(entry.path().filename());
  }
  std::set<std::string> compiled;
  for (const PlaygroundAsset& asset : PlaygroundAssets()) {
    INFO(asset.name);
    compiled.insert(std::string(asset.name));
    CHECK(asset.body == ReadSource(std::string(asset.name)));
    const std::string ext = std::filesystem::path(std::string(asset.name)).extension();
    const std::string type(asset.content_type);
    CHECK(type.rfind(ext == ".js"    ? "text/javascript"
                     : ext == ".css" ? "text/css"
                                     : "text/html",
                     0) == 0);
  }
  CHECK(compiled == on_disk);
  CHECK(compiled.count("index.html") == 1);
}

TEST_CASE("playground assets: no external fonts, scripts or styles") {
  for (const PlaygroundAsset& asset : PlaygroundAssets()) {
    INFO(asset.name);
    std::string body(asset.body);
    // The SVG namespace name is an identifier, not something fetched.
    const std::string svg_namespace = "http://www.w3.org/2000/svg";
    for (size_t at; (at = body.find(svg_namespace)) != std::string::npos;) {
      body.erase(at, svg_namespace.size());
    }
    CHECK(body.find("http://") == std::string::npos);
    CHECK(body.find("https://") == std::string::npos);
    CHECK(body.find("@import") == std::string::npos);
  }
}

}  // namespace
}  // namespace dllm
