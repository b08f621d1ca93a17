#include "server/http/http_server.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "engine/engine.h"
#include "engine/tokenizer/tokenizer.h"
#include "google/protobuf/util/json_util.h"
#include "server/engine_request_link.h"
#include "server/http/http_generation.h"
#include "server/http/http_openai_mapping.h"
#include "server/http/http_status_mapping.h"
#include "server/http/http_step_json.h"
#include "server/http/http_stop_sequences.h"
#include "server/http/param_fields_doc.h"
#include "server/http/playground_assets.h"
#include "server/response_mapping.h"

namespace dllm {
namespace {

constexpr char kJson[] = "application/json";
using nlohmann::json;

HttpResponse JsonResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.content_type = kJson;
  r.body = std::move(body);
  return r;
}

HttpResponse ErrorResponse(const absl::Status& status) {
  HttpResponse r = JsonResponse(ToHttpError(status).status, HttpErrorBody(status));
  // 429 is overload only (a full queue, or a deadline the backlog rules out): worth retrying
  // after the engine's forecast of the backlog, whole seconds, at least 1. Requests that can
  // never fit are 400s, which SDKs do not retry.
  if (r.status == 429) {
    const absl::Duration wait = RetryAfter(status).value_or(absl::Seconds(1));
    const int64_t seconds = absl::ToInt64Seconds(absl::Ceil(wait, absl::Seconds(1)));
    r.headers.emplace_back("Retry-After", absl::StrCat(std::max<int64_t>(1, seconds)));
  }
  return r;
}

// Passes committed deltas through the request's stop strings; ends the engine request as
// soon as one is found. Returns the text to emit.
std::string ApplyStops(HttpGeneration& call, StopSequences& stops, const std::string& delta) {
  if (stops.empty()) return delta;
  std::string out = stops.Append(delta);
  if (stops.stopped()) call.StopBySequence();
  return out;
}

// With stop strings the answer is what passed them; finish_reason "stop" when one matched.
void ApplyStopsToFinal(StopSequences& stops, const std::string& emitted,
                       v1::GenerateResponse* final) {
  if (stops.empty()) return;
  final->set_text(emitted + stops.Finish());
  if (stops.stopped()) final->set_finish_reason(v1::FINISH_REASON_EOS);
}

// ------------------------------------------------------------ generation replies

using Generations = std::vector<std::shared_ptr<HttpGeneration>>;

// Each finished choice's status and reply, for the n > 1 JSON (a unary or a streamed choice).
template <typename Choice>
std::vector<ChoiceOutcome> Outcomes(const std::vector<Choice>& choices) {
  std::vector<ChoiceOutcome> out;
  out.reserve(choices.size());
  for (const Choice& c : choices) out.push_back({c.status, c.final ? &*c.final : nullptr});
  return out;
}

// A non-streamed completion: one JSON response once every choice's final event arrived.
class UnaryCompletion final : public HttpResponseSource {
 public:
  UnaryCompletion(Generations calls, OpenAiRequest request, std::string response_id,
                  int64_t created)
      : request_(std::move(request)), response_id_(std::move(response_id)), created_(created) {
    for (auto& call : calls)
      choices_.push_back(Choice{std::move(call), StopSequences(request_.stop)});
  }

  void Start(std::function<void()> wake) override {
    for (Choice& c : choices_) c.call->SetWake(wake);
  }

  HttpOutput Poll() override {
    bool all_done = true;
    for (Choice& c : choices_) {
      if (c.done) continue;
      HttpGeneration::Taken taken = c.call->Take();
      for (const HttpGeneration::Item& item : taken.items) {
        if (!item.step) c.text += ApplyStops(*c.call, c.stops, item.delta);
      }
      if (!taken.final) {
        all_done = false;
        continue;
      }
      c.call->SetWake(nullptr);
      c.done = true;
      c.status = taken.status;
      if (c.status.ok()) {
        ApplyStopsToFinal(c.stops, c.text, &*taken.final);
        c.final = std::move(taken.final);
      }
    }
    if (!all_done) return {};
    HttpOutput out;
    out.end = true;
    // The request fails when no choice succeeded, with the first choice's error.
    if (std::none_of(choices_.begin(), choices_.end(),
                     [](const Choice& c) { return c.final.has_value(); })) {
      out.head = ErrorResponse(choices_[0].status);
      return out;
    }
    out.head = JsonResponse(
        200,
        DumpJson(
            choices_.size() == 1
                ? CompletionResponseJson(request_, response_id_, created_, *choices_[0].final)
                : MultiChoiceResponseJson(request_, response_id_, created_, Outcomes(choices_))));
    return out;
  }

  void Abandon() override {
    for (Choice& c : choices_) {
      c.call->SetWake(nullptr);
      c.call->call().Cancel();  // the engine ends it within one step
    }
  }

 private:
  struct Choice {
    std::shared_ptr<HttpGeneration> call;
    StopSequences stops;
    std::string text;
    bool done = false;
    absl::Status status;
    std::optional<v1::GenerateResponse> final;
  };
  const OpenAiRequest request_;
  const std::string response_id_;
  const int64_t created_;
  std::vector<Choice> choices_;
};

// A streamed completion (SSE): the role chunk, one event per non-empty committed delta (and
// per step with stream_options.include_steps), the final chunk, then [DONE]. With n > 1 every
// chunk names its choice (`index`), each choice ends with its own final chunk (or an error
// chunk), and a last chunk with no choices carries the summed usage.
class StreamedCompletion final : public HttpResponseSource {
 public:
  // `tokenizer` (the engine's) renders step events' tokens; it outlives every request.
  StreamedCompletion(Generations calls, OpenAiRequest request, std::string response_id,
                     int64_t created, const Tokenizer* tokenizer)
      : request_(std::move(request)),
        response_id_(std::move(response_id)),
        created_(created),
        tokenizer_(tokenizer) {
    for (auto& call : calls) {
      choices_.emplace_back(std::move(call), request_.stop);
    }
  }

  void Start(std::function<void()> wake) override {
    for (Choice& c : choices_) c.call->SetWake(wake);
  }

  HttpOutput Poll() override {
    HttpOutput out;
    if (first_) {
      first_ = false;
      HttpResponse head;
      head.content_type = "text/event-stream";
      head.headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
      head.streamed = true;
      out.head = std::move(head);
      for (size_t i = 0; i < choices_.size(); ++i) {
        AddChunk(&out, static_cast<int>(i),
                 DeltaChunkJson(request_, response_id_, created_, "", true));
      }
    }
    bool all_done = true;
    for (size_t i = 0; i < choices_.size(); ++i) {
      if (!choices_[i].done) PollChoice(static_cast<int>(i), &out);
      all_done &= choices_[i].done;
    }
    if (!all_done) return out;
    if (choices_.size() == 1) {
      const Choice& c = choices_[0];
      AddEvent(&out, c.status.ok()
                         ? DumpJson(FinalChunkJson(request_, response_id_, created_, *c.final))
                         : HttpErrorBody(c.status));
    } else {
      AddEvent(&out,
               DumpJson(UsageChunkJson(request_, response_id_, created_, Outcomes(choices_))));
    }
    AddEvent(&out, "[DONE]");
    out.end = true;
    return out;
  }

  void Abandon() override {
    for (Choice& c : choices_) {
      c.call->SetWake(nullptr);
      c.call->call().Cancel();
    }
  }

 private:
  struct Choice {
    Choice(std::shared_ptr<HttpGeneration> generation, std::vector<std::string> stop)
        : call(std::move(generation)), stops(std::move(stop)) {}
    std::shared_ptr<HttpGeneration> call;
    StopSequences stops;
    std::string emitted;
    bool done = false;
    absl::Status status;
    std::optional<v1::GenerateResponse> final;
    // Logprobs of tokens whose text is not yet sent, and the bytes already sent of the first
    // of them (a delta may end inside a token); text_offset is the completions' running offset.
    google::protobuf::RepeatedPtrField<v1::TokenLogprob> pending_logprobs;
    int64_t pending_text_bytes = 0;
    int64_t text_offset = 0;
  };

  // One choice's events since the last poll; its final chunk (n > 1) once it is done.
  void PollChoice(int index, HttpOutput* out) {
    Choice& c = choices_[index];
    HttpGeneration::Taken taken = c.call->Take();
    for (const HttpGeneration::Item& item : taken.items) {
      if (item.step) {
        if (request_.include_steps) {
          AddEvent(out, DumpJson(StepEventJson(*item.step, *tokenizer_, response_id_,
                                               !item.provisional_dropped)));
        }
        continue;
      }
      for (const v1::TokenLogprob& t : item.logprobs) *c.pending_logprobs.Add() = t;
      AddDelta(index, out, ApplyStops(*c.call, c.stops, item.delta));
    }
    if (!taken.final) return;
    c.call->SetWake(nullptr);
    c.done = true;
    c.status = taken.status;
    if (taken.status.ok() && !c.stops.empty()) {
      const std::string rest = c.stops.Finish();
      AddDelta(index, out, rest);
      ApplyStopsToFinal(c.stops, c.emitted, &*taken.final);
    }
    // Tokens still pending brought no text (special tokens at the end): the unary reply
    // leaves them out too (TokensCoveringText).
    if (taken.status.ok()) c.final = std::move(taken.final);
    if (choices_.size() == 1) return;  // its final chunk is the stream's last (Poll)
    if (!c.status.ok()) {
      AddEvent(out,
               DumpJson(ChoiceErrorChunkJson(request_, response_id_, created_, index, c.status)));
      return;
    }
    nlohmann::json last = FinalChunkJson(request_, response_id_, created_, *c.final);
    last.erase("usage");  // summed over the choices in the last chunk
    AddChunk(out, index, std::move(last));
  }

  static void AddEvent(HttpOutput* out, const std::string& payload) {
    absl::StrAppend(&out->data, "data: ", payload, "\n\n");
  }
  void AddChunk(HttpOutput* out, int index, nlohmann::json chunk) {
    chunk["choices"][0]["index"] = index;
    AddEvent(out, DumpJson(chunk));
  }
  // With logprobs the chunk carries the pending tokens that its text covers: a stop string's
  // hold-back can keep a token's bytes for a later chunk, and its logprob goes with them.
  void AddDelta(int index, HttpOutput* out, const std::string& text) {
    if (text.empty()) return;
    Choice& c = choices_[index];
    if (!c.stops.empty()) c.emitted += text;  // only kept when there are stop strings
    nlohmann::json logprobs = nullptr;
    if (request_.request.has_logprobs()) {
      // Bytes of text the pending tokens have to cover; negative: the last chunk's last token
      // reached past its text, and this text finishes it.
      const int64_t to_cover = c.pending_text_bytes + static_cast<int64_t>(text.size());
      const int count = TokensCoveringText(c.pending_logprobs,
                                           static_cast<size_t>(std::max<int64_t>(to_cover, 0)));
      logprobs = LogprobsJson(request_, c.pending_logprobs, count, &c.text_offset);
      int64_t covered = 0;
      for (int i = 0; i < count; ++i) covered += c.pending_logprobs[i].token_bytes().size();
      c.pending_text_bytes = to_cover - covered;
      c.pending_logprobs.DeleteSubrange(0, count);
    }
    AddChunk(out, index,
             DeltaChunkJson(request_, response_id_, created_, text, false, std::move(logprobs)));
  }

  const OpenAiRequest request_;
  const std::string response_id_;
  const int64_t created_;
  const Tokenizer* const tokenizer_;
  std::vector<Choice> choices_;
  bool first_ = true;
};

// ------------------------------------------------------------ routes

class Routes final : public HttpRoutes {
 public:
  static constexpr char kTimeoutHeader[] = "X-Request-Timeout-Ms";
  static constexpr int64_t kMaxTimeoutMs = int64_t{24} * 3600 * 1000;  // a day

  Routes(const ServerConfig& config, Gateway* gateway)
      : gateway_(gateway),
        model_name_(config.http.model_name),
        max_choices_(config.limits.max_choices) {
    if (model_name_.empty()) {
      model_name_ = std::filesystem::path(config.engine.model).lexically_normal().filename();
      if (model_name_.empty()) {
        model_name_ =
            std::filesystem::path(config.engine.model).lexically_normal().parent_path().filename();
      }
      if (model_name_.empty()) model_name_ = "dllm";
    }
  }

  // Before any body byte is read: refuse what must never be read. Compressed bodies are not
  // inflated, chunked ones not accepted, and an unauthenticated caller must not make the
  // server read anything. Malformed heads (control characters, repeated Content-Length) and
  // framing that proxies and we might read differently (RFC 9112 section 6.3) never get
  // here: the listener's head check refuses them.
  std::optional<HttpResponse> Precheck(const HttpRequestHead& head) override {
    const char* method = GenerationMethod(head);
    auto refuse = [&](int http_status, std::string_view message, std::string_view code,
                      absl::StatusCode status_code) {
      if (method != nullptr) {
        gateway_->RecordCall(method, gateway_->LogId(v1::GenerateRequest()),
                             absl::Status(status_code, std::string(message)), nullptr, absl::Now(),
                             "http");
      }
      return JsonResponse(http_status, HttpErrorBody(message, "invalid_request_error", code));
    };
    if (head.Header("Transfer-Encoding")) {
      return refuse(411,
                    "Transfer-Encoding request bodies (chunked) are not accepted: send "
                    "Content-Length",
                    "length_required", absl::StatusCode::kInvalidArgument);
    }
    if (const auto header = head.Header("Content-Encoding");
        header && !absl::EqualsIgnoreCase(std::string(*header), "identity")) {
      const std::string encoding(*header);
      return refuse(415,
                    absl::StrCat("Content-Encoding '", encoding,
                                 "' is not accepted: send the request body uncompressed"),
                    "unsupported_encoding", absl::StatusCode::kInvalidArgument);
    }
    const bool takes_body = method != nullptr || IsTokenize(head);
    if (!takes_body) {
      // Only the generation calls and tokenize take a body: any other request with one is
      // refused from its head (404 where nothing is served, else 413), so that no
      // unauthenticated path reads (or answers Expect: 100-continue for) a body.
      const auto length = head.Header("Content-Length");
      uint64_t bytes = 0;
      if (length && (!absl::SimpleAtoi(std::string(*length), &bytes) || bytes > 0)) {
        if (!Serves(head.path)) return NoRoute(head);
        return JsonResponse(
            413, HttpErrorBody(absl::StrCat(head.method, " ", head.path, " takes no request body"),
                               "invalid_request_error", "body_not_accepted"));
      }
    }
    if (takes_body) {
      Engine* engine = nullptr;
      if (absl::Status st = gateway_->CheckAvailable(head.Header("Authorization"), &engine);
          !st.ok()) {
        if (method != nullptr) {
          gateway_->RecordCall(method, gateway_->LogId(v1::GenerateRequest()), st, nullptr,
                               absl::Now(), "http");
        }
        return ErrorResponse(st);
      }
      // JSON only: a browser page may post text/plain or a form to any origin without a
      // CORS preflight, so accepting those would let any page a visitor opens generate here.
      const auto type = head.Header("Content-Type");
      const std::string given = type ? std::string(*type) : std::string();
      std::string media = given.substr(0, given.find(';'));
      absl::StripAsciiWhitespace(&media);
      if (!absl::EqualsIgnoreCase(media, "application/json")) {
        return refuse(415,
                      absl::StrCat("Content-Type must be application/json (got ",
                                   type ? absl::StrCat("'", given, "'") : "none", ")"),
                      "unsupported_media_type", absl::StatusCode::kInvalidArgument);
      }
    }
    return std::nullopt;
  }

  HttpReply Handle(HttpRequest request) override {
    const HttpRequestHead& head = request.head;
    const bool get = head.method == "GET" || head.method == "HEAD";
    const std::string& path = head.path;
    if (path == "/v1/chat/completions" || path == "/v1/completions") {
      if (head.method != "POST") return Reply(MethodNotAllowed(head, "POST"));
      return Generate(path == "/v1/completions" ? OpenAiEndpoint::kCompletions
                                                : OpenAiEndpoint::kChatCompletions,
                      GenerationMethod(head), request);
    }
    if (path == "/health") {
      if (!get) return Reply(MethodNotAllowed(head, "GET, HEAD"));
      const bool serving = gateway_->Serving();
      return Reply(JsonResponse(serving ? 200 : 503, serving ? R"({"status":"serving"})"
                                                             : R"({"status":"not_serving"})"));
    }
    if (path == "/v1/models" || absl::StartsWith(path, "/v1/models/")) {
      if (!get) return Reply(MethodNotAllowed(head, "GET, HEAD"));
      Engine* engine = nullptr;
      if (absl::Status st = gateway_->CheckAvailable(head.Header("Authorization"), &engine);
          !st.ok()) {
        return Reply(ErrorResponse(st));
      }
      if (path == "/v1/models") {
        return Reply(JsonResponse(200, DumpJson(ModelListJson(model_name_, Created()))));
      }
      const std::string id = path.substr(std::string_view("/v1/models/").size());
      if (id != model_name_) return Reply(ErrorResponse(ModelNotFound(id)));
      return Reply(JsonResponse(200, DumpJson(ModelListJson(model_name_, Created())["data"][0])));
    }
    if (path == "/v1/dllm/fields") {
      // The request fields' table (names, types, ranges, docs): no token, like the
      // playground's files; it describes the API, not the server's data.
      if (!get) return Reply(MethodNotAllowed(head, "GET, HEAD"));
      return Reply(JsonResponse(200, DumpJson(ParamFieldsJson())));
    }
    if (path == "/v1/dllm/model_info") {
      if (!get) return Reply(MethodNotAllowed(head, "GET, HEAD"));
      return Reply(ModelInfo(head));
    }
    if (path == "/v1/dllm/tokenize") {
      if (head.method != "POST") return Reply(MethodNotAllowed(head, "POST"));
      return Reply(Tokenize(request));
    }
    // The playground: static files compiled into the binary, no token needed (they hold no
    // data; every API call they make carries the token the page asks for).
    if (const PlaygroundAsset* asset = PlaygroundAssetAt(path)) {
      if (!get) return Reply(MethodNotAllowed(head, "GET, HEAD"));
      HttpResponse r;
      r.content_type = std::string(asset->content_type);
      r.body = std::string(asset->body);
      r.headers = {{"Cache-Control", "no-cache"},
                   {"Content-Security-Policy",
                    "default-src 'self'; img-src 'self' data:; object-src 'none'; "
                    "base-uri 'none'; frame-ancestors 'none'"}};
      return Reply(std::move(r));
    }
    return Reply(NoRoute(head));
  }

  // The playground file served at `path` ("/" is index.html), or null.
  static const PlaygroundAsset* PlaygroundAssetAt(const std::string& path) {
    for (const PlaygroundAsset& asset : PlaygroundAssets()) {
      if (path == (asset.name == "index.html"
                       ? std::string("/")
                       : absl::StrCat("/playground/", std::string(asset.name)))) {
        return &asset;
      }
    }
    return nullptr;
  }

  static HttpResponse NoRoute(const HttpRequestHead& head) {
    return JsonResponse(404,
                        HttpErrorBody(absl::StrCat("no route for ", head.method, " ", head.path),
                                      "not_found_error", "not_found"));
  }

  // Whether Handle serves `path` (for some method): the API paths and the playground's files.
  static bool Serves(const std::string& path) {
    if (path == "/v1/chat/completions" || path == "/v1/completions" || path == "/health" ||
        path == "/v1/models" || absl::StartsWith(path, "/v1/models/") ||
        path == "/v1/dllm/fields" || path == "/v1/dllm/model_info" || path == "/v1/dllm/tokenize") {
      return true;
    }
    return PlaygroundAssetAt(path) != nullptr;
  }

  HttpResponse Refusal(const HttpRequestHead* head, int status, std::string_view message,
                       std::string_view code) override {
    std::string text(message);
    if (status == 413) absl::StrAppend(&text, " (server.max_receive_message_bytes)");
    // A refused generation call is a finished call like any other (gRPC counts a message
    // over its size limit as RESOURCE_EXHAUSTED).
    if (const char* method = head != nullptr ? GenerationMethod(*head) : nullptr) {
      gateway_->RecordCall(method, gateway_->LogId(v1::GenerateRequest()),
                           absl::Status(status == 413   ? absl::StatusCode::kResourceExhausted
                                        : status >= 500 ? absl::StatusCode::kInternal
                                                        : absl::StatusCode::kInvalidArgument,
                                        text),
                           nullptr, absl::Now(), "http");
    }
    const std::string_view type = status >= 500 ? "internal_error" : "invalid_request_error";
    return JsonResponse(status, HttpErrorBody(text, type, code));
  }

 private:
  static HttpReply Reply(HttpResponse response) { return HttpReply{std::move(response), nullptr}; }

  // The gRPC method name a generation call is counted under, or null for other requests.
  static const char* GenerationMethod(const HttpRequestHead& head) {
    if (head.method != "POST") return nullptr;
    return head.path == "/v1/chat/completions" ? "ChatCompletions"
           : head.path == "/v1/completions"    ? "Completions"
                                               : nullptr;
  }

  // The deadline a generation's X-Request-Timeout-Ms header sets (gRPC's deadline, for HTTP
  // clients): InfiniteFuture without one. Past it a request ends as `deadline` (504, or an
  // error event mid-stream), and one the backlog forecast says cannot make it is refused at
  // once (429 with Retry-After; engine.refuse_late_requests).
  static absl::StatusOr<absl::Time> RequestDeadline(const HttpRequestHead& head, absl::Time now) {
    const std::optional<std::string_view> header = head.Header(kTimeoutHeader);
    if (!header) return absl::InfiniteFuture();
    int64_t ms = 0;
    if (!absl::SimpleAtoi(std::string(*header), &ms) || ms < 1 || ms > kMaxTimeoutMs) {
      return absl::InvalidArgumentError(
          absl::StrCat(kTimeoutHeader, ": '", std::string(*header),
                       "' is not a whole number of milliseconds in [1, ", kMaxTimeoutMs, "]"));
    }
    return now + absl::Milliseconds(ms);
  }

  static bool IsTokenize(const HttpRequestHead& head) {
    return head.method == "POST" && head.path == "/v1/dllm/tokenize";
  }

  // `allow`: the methods the path takes (RFC 9110 §15.5.6: a 405 carries Allow).
  static HttpResponse MethodNotAllowed(const HttpRequestHead& head, std::string_view allow) {
    HttpResponse r = JsonResponse(
        405, HttpErrorBody(absl::StrCat("method ", head.method, " not allowed on ", head.path),
                           "invalid_request_error", "method_not_allowed"));
    r.headers.emplace_back("Allow", std::string(allow));
    return r;
  }

  static int64_t Created() { return absl::ToUnixSeconds(absl::Now()); }

  static absl::Status ModelNotFound(const std::string& model) {
    return absl::NotFoundError(absl::StrCat("model: '", model, "' is not served here"));
  }

  // Diffusion-specific: GetModelInfo's answer (model, effective defaults, limits) as JSON,
  // with proto field names; the playground reads its knobs' ranges from it.
  HttpResponse ModelInfo(const HttpRequestHead& head) {
    v1::GetModelInfoResponse info;
    if (absl::Status st = gateway_->DescribeModel(head.Header("Authorization"), &info); !st.ok()) {
      return ErrorResponse(st);
    }
    google::protobuf::util::JsonPrintOptions options;
    options.always_print_primitive_fields = true;
    options.preserve_proto_field_names = true;
    std::string body;
    if (!google::protobuf::util::MessageToJsonString(info, &body, options).ok()) {
      return ErrorResponse(absl::InternalError("model info: cannot render as JSON"));
    }
    json out = json::parse(body, nullptr, /*allow_exceptions=*/false);
    out.erase("model_dir");  // a server path: nothing a browser needs
    out["model"] = model_name_;
    return JsonResponse(200, DumpJson(out));
  }

  // Diffusion-specific: gRPC's Tokenize for raw text ({"prompt": TEXT}, no chat template, as
  // /v1/completions reads a prompt), so that a client can build a seeded `canvas` of token ids
  // from text (the playground's infill mode does). The ids, and each token's text (its bytes
  // read as UTF-8, U+FFFD where a token holds part of a character).
  HttpResponse Tokenize(const HttpRequest& req) {
    Engine* engine = nullptr;
    if (absl::Status st = gateway_->CheckAvailable(req.head.Header("Authorization"), &engine);
        !st.ok()) {
      return ErrorResponse(st);
    }
    const json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded() || !body.is_object() || body.size() != 1 || !body.contains("prompt") ||
        !body["prompt"].is_string()) {
      return ErrorResponse(absl::InvalidArgumentError(
          "request body: expected {\"prompt\": TEXT} (raw text, tokenized without a chat "
          "template)"));
    }
    v1::TokenizeRequest request;
    request.set_prompt(body["prompt"].get<std::string>());
    absl::StatusOr<v1::TokenizeResponse> tokens = gateway_->Tokenize(engine, request);
    if (!tokens.ok()) return ErrorResponse(tokens.status());
    json out = {{"token_ids", tokens->token_ids()}, {"tokens", json::array()}};
    // DumpJson writes invalid UTF-8 as U+FFFD.
    for (const std::string& bytes : tokens->token_bytes()) out["tokens"].push_back(bytes);
    out["count"] = tokens->token_ids_size();
    return JsonResponse(200, DumpJson(out));
  }

  HttpReply Generate(OpenAiEndpoint endpoint, const char* method, const HttpRequest& req) {
    auto generation = std::make_shared<HttpGeneration>(gateway_, method);
    GatewayCall& call = generation->call();
    // HTTP requests carry no request id: the server assigns one.
    const std::string log_id = call.Identify(v1::GenerateRequest());
    auto reject = [&](const absl::Status& status) {
      call.Record(status, nullptr);
      return Reply(ErrorResponse(status));
    };
    absl::StatusOr<OpenAiRequest> parsed = ParseOpenAiRequest(endpoint, req.body);
    if (!parsed.ok()) return reject(parsed.status());
    if (parsed->model != model_name_) return reject(ModelNotFound(parsed->model));
    if (parsed->n > max_choices_) {
      return reject(absl::InvalidArgumentError(
          absl::StrCat("n: ", parsed->n, " exceeds limits.max_choices (", max_choices_, ")")));
    }
    absl::StatusOr<absl::Time> deadline = RequestDeadline(req.head, absl::Now());
    if (!deadline.ok()) return reject(deadline.status());
    // The token was checked before the body was read (Precheck, which the listener runs on
    // every request before Handle); Start checks availability again, as the server may have
    // started draining since. Choice i decodes with seed + i (the admitted seed: the
    // request's, else the configured default). Admission is all or nothing: when one choice
    // is refused (queue full), those already started are cancelled and the request fails.
    const bool step_events = parsed->include_steps;
    Generations generations = {generation};
    for (int i = 0; i < parsed->n; ++i) {
      if (i > 0) generations.push_back(std::make_shared<HttpGeneration>(gateway_, method));
      const absl::Status started = generations[i]->call().Start(
          Gateway::TokenCheck::kAlreadyChecked, req.head.Header("Authorization"), *deadline,
          parsed->request, generations[i], [&](GenerationRequest* r) {
            r->step_events = step_events;
            r->decoding.seed += static_cast<uint64_t>(i);
          });
      if (!started.ok()) {
        for (int j = 0; j < i; ++j) generations[j]->call().Cancel();
        if (i == 0) return reject(RenameFieldInError(started, *parsed));
        generations[i]->call().Record(started, nullptr);
        return Reply(ErrorResponse(RenameFieldInError(started, *parsed)));
      }
    }
    const Tokenizer* tokenizer = &call.engine()->tokenizer();

    std::string response_id =
        absl::StrCat(endpoint == OpenAiEndpoint::kChatCompletions ? "chatcmpl-" : "cmpl-", log_id);
    HttpReply reply;
    if (parsed->stream) {
      reply.source = std::make_shared<StreamedCompletion>(
          std::move(generations), *std::move(parsed), std::move(response_id), Created(), tokenizer);
    } else {
      reply.source = std::make_shared<UnaryCompletion>(std::move(generations), *std::move(parsed),
                                                       std::move(response_id), Created());
    }
    return reply;
  }

  Gateway* const gateway_;
  std::string model_name_;
  const int max_choices_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const ServerConfig& config,
                                                              Gateway* gateway, Logger* logger) {
  HttpListenerOptions options;
  if (config.tls.enabled()) {
    for (const auto& [key, path] :
         {std::pair<const char*, const std::string*>{"tls.cert", &config.tls.cert},
          {"tls.key", &config.tls.key},
          {"tls.client_ca", &config.tls.client_ca}}) {
      if (!path->empty() && access(path->c_str(), R_OK) != 0) {
        return absl::NotFoundError(absl::StrCat(key, ": cannot read '", *path, "'"));
      }
    }
    options.tls_cert = config.tls.cert;
    options.tls_key = config.tls.key;
    options.tls_client_ca = config.tls.client_ca;
  }
  options.address = config.http.address;
  options.port = config.http.port;
  options.threads = config.http.threads;
  options.max_connections = config.http.max_connections;
  options.max_connections_per_peer = config.http.max_connections_per_peer;
  options.max_body_bytes = static_cast<size_t>(config.server.max_receive_message_bytes);
  options.max_buffered_body_bytes = static_cast<size_t>(config.http.max_buffered_body_bytes);
  options.head_timeout = absl::Seconds(config.http.head_timeout_seconds);
  options.read_timeout = absl::Seconds(config.http.read_timeout_seconds);
  options.write_timeout = absl::Seconds(config.http.read_timeout_seconds);
  // Idle keep-alive connections cost little now, but a timeout shorter than a client's own
  // idle timeout makes it reuse sockets the server just closed (connection resets): 5 s,
  // advertised in Keep-Alive, is what clients expect.
  options.idle_timeout = absl::Seconds(5);
  options.max_requests_per_connection = 1000;
  std::unique_ptr<HttpServer> out(new HttpServer());
  options.log = [logger, limiter = out->accept_log_limiter_.get()](std::string_view event,
                                                                   std::string_view detail) {
    int64_t suppressed = 0;
    if (!limiter->Admit(absl::Now(), &suppressed)) return;
    logger->Warning(std::string(event),
                    {{"detail", std::string(detail)}, {"suppressed", suppressed}});
  };
  out->routes_ = std::make_unique<Routes>(config, gateway);
  absl::StatusOr<std::unique_ptr<HttpListener>> listener =
      HttpListener::Start(std::move(options), out->routes_.get());
  if (!listener.ok()) return listener.status();
  out->listener_ = *std::move(listener);
  out->connection_metrics_ = std::make_shared<HttpConnectionMetrics>(out->listener_.get());
  return out;
}

HttpServer::HttpServer() : accept_log_limiter_(std::make_unique<LogRateLimiter>(1)) {}

HttpServer::~HttpServer() {
  if (connection_metrics_ != nullptr) connection_metrics_->Detach();
  if (listener_ != nullptr) listener_->Stop(absl::ZeroDuration());
}

int HttpServer::port() const { return listener_->port(); }

void HttpServer::StopAccepting() { listener_->StopAccepting(); }

bool HttpServer::Stop(absl::Duration timeout) { return listener_->Stop(timeout); }

}  // namespace dllm
