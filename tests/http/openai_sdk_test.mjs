// The official OpenAI Node SDK (pinned in package.json) against a running dllm-server.
// Started by tests/e2e/http_test.py, which runs the server and passes:
//   DLLM_BASE_URL  http://127.0.0.1:PORT/v1     DLLM_API_KEY  a valid bearer token
//   DLLM_MODEL     the served model id          argv[2]       scenario: "api" | "queue_full"
// Exits non-zero (assertion error) on the first mismatch.
import assert from "node:assert/strict";
import OpenAI from "openai";

const baseURL = process.env.DLLM_BASE_URL;
const apiKey = process.env.DLLM_API_KEY;
const model = process.env.DLLM_MODEL;
const scenario = process.argv[2] ?? "api";
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120_000 });

function checkUsage(usage, maxTokens) {
  assert.ok(usage.prompt_tokens > 0, "usage.prompt_tokens");
  assert.ok(usage.completion_tokens >= 0 && usage.completion_tokens <= maxTokens,
            `usage.completion_tokens ${usage.completion_tokens}`);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
}

async function expectError(promise, ErrorClass, status, param) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof ErrorClass, `expected ${ErrorClass.name}, got ${e}`);
    assert.equal(e.status, status);
    assert.equal(typeof e.error?.message, "string", "error.message");
    if (param !== undefined) assert.equal(e.error.param, param);
    return e;
  }
  assert.fail(`expected ${ErrorClass.name} (${status})`);
}

async function api() {
  // GET /v1/models
  const models = [];
  for await (const m of client.models.list()) models.push(m.id);
  assert.deepEqual(models, [model]);

  // Unary chat completion.
  const messages = [{ role: "user", content: "Hello, who are you?" }];
  const settings = { model, messages, max_tokens: 24, temperature: 0.8, seed: 1234 };
  const unary = await client.chat.completions.create(settings);
  assert.equal(unary.object, "chat.completion");
  assert.equal(unary.model, model);
  assert.equal(unary.choices.length, 1);
  assert.equal(unary.choices[0].message.role, "assistant");
  assert.equal(typeof unary.choices[0].message.content, "string");
  assert.ok(["stop", "length"].includes(unary.choices[0].finish_reason));
  checkUsage(unary.usage, 24);
  assert.ok(unary.cache_stats.steps > 0, "cache_stats.steps");
  assert.ok(unary.cache_stats.full_steps >= 1, "cache_stats.full_steps");

  // Streaming chat completion: the deltas add up to the unary answer for the same seed.
  const stream = await client.chat.completions.create({ ...settings, stream: true });
  let text = "";
  let chunks = 0;
  let last = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, "chat.completion.chunk");
    chunks += 1;
    text += chunk.choices[0]?.delta?.content ?? "";
    last = chunk;
  }
  assert.ok(chunks >= 2, `only ${chunks} chunks`);
  assert.equal(text, unary.choices[0].message.content);
  assert.equal(last.choices[0].finish_reason, unary.choices[0].finish_reason);
  assert.deepEqual(last.usage, unary.usage);
  assert.equal(last.cache_stats.steps, unary.cache_stats.steps);

  // The SDK's stream helper agrees as well.
  const runner = client.chat.completions.stream({ ...settings });
  const completion = await runner.finalChatCompletion();
  assert.equal(completion.choices[0].message.content, text);

  // Legacy completions.
  const legacy = await client.completions.create({ model, prompt: "The capital of France is",
                                                   max_tokens: 16, seed: 5 });
  assert.equal(legacy.object, "text_completion");
  assert.equal(typeof legacy.choices[0].text, "string");
  checkUsage(legacy.usage, 16);
  const legacyStream = await client.completions.create({ model, prompt: "The capital of France is",
                                                         max_tokens: 16, seed: 5, stream: true });
  let legacyText = "";
  for await (const chunk of legacyStream) legacyText += chunk.choices[0]?.text ?? "";
  assert.equal(legacyText, legacy.choices[0].text);

  // Infilling: the suffix is read by every step and is not part of the completion.
  const filled = await client.completions.create({ model, prompt: "The capital of France is",
                                                   suffix: ", a city on the Seine.",
                                                   max_tokens: 16, seed: 5 });
  assert.equal(typeof filled.choices[0].text, "string");
  assert.ok(!filled.choices[0].text.includes("a city on the Seine"));
  assert.equal(filled.usage.prompt_tokens, legacy.usage.prompt_tokens);

  // Diffusion knobs as extra body fields.
  const knobs = await client.chat.completions.create({
    model, messages, max_tokens: 16,
    decoding: { schedule: "block", steps: 8, block_length: 16 }, cache: { policy: "none" } });
  assert.equal(knobs.cache_stats.steps, 8);
  assert.equal(knobs.cache_stats.partial_steps, 0);

  // Logprobs: the chat shape (bytes add up to the answer's bytes, alternatives most probable
  // first), the same tokens streamed, and the completions shape.
  const withLogprobs = await client.chat.completions.create({ ...settings, logprobs: true,
                                                              top_logprobs: 3 });
  assert.equal(withLogprobs.choices[0].message.content, unary.choices[0].message.content);
  const content = withLogprobs.choices[0].logprobs.content;
  assert.ok(content.length > 0, "logprobs.content");
  assert.deepEqual(Buffer.from(content.flatMap((t) => t.bytes)),
                   Buffer.from(unary.choices[0].message.content, "utf8"));
  for (const t of content) {
    assert.ok(t.logprob <= 0, `logprob ${t.logprob}`);
    assert.equal(t.top_logprobs.length, 3);
    assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[2].logprob);
    assert.ok(t.logprob <= t.top_logprobs[0].logprob + 1e-6);
  }
  const lpStream = await client.chat.completions.create({ ...settings, logprobs: true,
                                                          top_logprobs: 3, stream: true });
  const streamedTokens = [];
  for await (const chunk of lpStream) {
    streamedTokens.push(...(chunk.choices[0]?.logprobs?.content ?? []));
  }
  assert.deepEqual(streamedTokens, content);
  const legacyLp = await client.completions.create({ model, prompt: "The capital of France is",
                                                     max_tokens: 16, seed: 5, logprobs: 2 });
  assert.equal(legacyLp.choices[0].text, legacy.choices[0].text);
  const lp = legacyLp.choices[0].logprobs;
  assert.equal(lp.tokens.length, lp.token_logprobs.length);
  assert.equal(lp.top_logprobs.length, lp.tokens.length);
  assert.deepEqual(lp.text_offset.slice(0, 1), lp.tokens.length ? [0] : []);
  await expectError(client.chat.completions.create({ ...settings, logprobs: true,
                                                     top_logprobs: 21 }),
                    OpenAI.BadRequestError, 400, "top_logprobs");

  // Errors, as the SDK's typed exceptions.
  await expectError(new OpenAI({ baseURL, apiKey: "wrong-token", maxRetries: 0 })
                        .chat.completions.create(settings),
                    OpenAI.AuthenticationError, 401);
  // n choices: seeds seed, seed + 1, ...; choice 0 is the single request's answer.
  const two = await client.chat.completions.create({ ...settings, n: 2 });
  assert.deepEqual(two.choices.map((c) => c.index), [0, 1]);
  assert.equal(two.choices[0].message.content, unary.choices[0].message.content);
  const second = await client.chat.completions.create({ ...settings, seed: settings.seed + 1 });
  assert.equal(two.choices[1].message.content, second.choices[0].message.content);
  assert.equal(two.usage.prompt_tokens, unary.usage.prompt_tokens);
  assert.equal(two.usage.completion_tokens,
               unary.usage.completion_tokens + second.usage.completion_tokens);
  await expectError(client.chat.completions.create({ ...settings, n: 9 }),
                    OpenAI.BadRequestError, 400, "n");
  await expectError(client.chat.completions.create({ ...settings, max_tokens: 100000 }),
                    OpenAI.BadRequestError, 400, "max_tokens");
  await expectError(client.chat.completions.create({ ...settings, model: "no-such-model" }),
                    OpenAI.NotFoundError, 404, "model");
  console.log(`openai sdk: api ok (${chunks} chunks, ${JSON.stringify(unary.usage)})`);
}

async function queueFull() {
  // The server runs one sequence at a time with a queue of one: of 6 concurrent long
  // requests at least one must be refused with 429, and every other one must succeed.
  const settings = { model, messages: [{ role: "user", content: "Tell me a story." }],
                     max_tokens: 256, decoding: { schedule: "block", block_length: 256 } };
  const results = await Promise.allSettled(
      Array.from({ length: 6 }, () => client.chat.completions.create(settings)));
  const ok = results.filter((r) => r.status === "fulfilled").length;
  const limited = results.filter((r) => r.status === "rejected" &&
                                        r.reason instanceof OpenAI.RateLimitError &&
                                        r.reason.status === 429).length;
  for (const r of results) {
    if (r.status === "rejected" && !(r.reason instanceof OpenAI.RateLimitError)) throw r.reason;
  }
  assert.ok(ok >= 1, "no request succeeded");
  assert.ok(limited >= 1, "no request got 429");
  assert.equal(ok + limited, 6);
  console.log(`openai sdk: queue_full ok (${ok} ok, ${limited} x 429)`);
}

await (scenario === "queue_full" ? queueFull() : api());
