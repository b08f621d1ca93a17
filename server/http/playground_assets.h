// The browser playground's static files (server/http/playground/: HTML, CSS, ES modules), compiled
// into the binary at build time (server/http/playground/embed_assets.cmake), so a read-only
// container serves them with nothing else on disk. The HTTP listener serves them at
// GET / (index.html) and GET /playground/<file>.
//
// Thread-safety: immutable data.
#ifndef DLLM_SERVER_HTTP_PLAYGROUND_ASSETS_H_
#define DLLM_SERVER_HTTP_PLAYGROUND_ASSETS_H_

#include <span>
#include <string_view>

namespace dllm {

struct PlaygroundAsset {
  std::string_view name;          // file name under server/http/playground/, e.g. "index.html"
  std::string_view content_type;  // e.g. "text/html; charset=utf-8"
  std::string_view body;
};

// Every asset, in file-name order. Never empty in a built binary.
std::span<const PlaygroundAsset> PlaygroundAssets();

}  // namespace dllm

#endif  // DLLM_SERVER_HTTP_PLAYGROUND_ASSETS_H_
