#!/usr/bin/env python3
"""A dllm-serve client in Python with stubs generated from proto/ (see docs/api.md).

Generate the stubs once (Debian: python3-grpcio, protobuf-compiler, protobuf-compiler-grpc;
python3-grpc-tools' bundled protoc 3.5 is too old for proto3 `optional`, so use the system
protoc with the gRPC Python plugin):

    mkdir -p stubs
    protoc -I proto --python_out=stubs --grpc_out=stubs \
        --plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin dllm/v1/dllm.proto
    # optional, for the health check (grpc.health.v1; the module is health_pb2 because the
    # package name `grpc` is taken by grpcio itself):
    protoc -I tests/e2e/proto --python_out=stubs --grpc_out=stubs \
        --plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin health.proto

Then, with the stubs folder on the module path:
    PYTHONPATH=stubs python3 docs/examples/python_grpc_client.py --address localhost:50051
--check turns the example into a test (tests/e2e/http_test.py runs it against a real server).
"""

import argparse


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", default="localhost:50051")
    parser.add_argument("--token", help="bearer token, when the server requires one")
    parser.add_argument("--prompt", default="add 12 30")
    parser.add_argument("--check", action="store_true", help="assert the answers (tests)")
    args = parser.parse_args()

    import grpc
    from dllm.v1 import dllm_pb2, dllm_pb2_grpc  # generated, see above (PYTHONPATH)

    channel = grpc.insecure_channel(args.address)
    stub = dllm_pb2_grpc.DiffusionLMStub(channel)
    metadata = [("authorization", "Bearer " + args.token)] if args.token else []

    # Health (the standard grpc.health.v1 service; needs no token).
    try:
        import health_pb2  # generated, see above
        import health_pb2_grpc
    except ImportError:
        if args.check:
            raise
        health_pb2 = None
    if health_pb2 is not None:
        health = health_pb2_grpc.HealthStub(channel)
        status = health.Check(health_pb2.HealthCheckRequest(service="dllm.v1.DiffusionLM"),
                              timeout=10).status
        print("health:", health_pb2.HealthCheckResponse.ServingStatus.Name(status))
        if args.check:
            assert status == health_pb2.HealthCheckResponse.SERVING

    info = stub.GetModelInfo(dllm_pb2.GetModelInfoRequest(), metadata=metadata, timeout=10)
    print("model:", info.family, info.model_dir, "vocab", info.vocab_size)

    chat = dllm_pb2.ChatMessages(messages=[dllm_pb2.ChatMessage(role="user", content=args.prompt)])
    tokens = stub.Tokenize(dllm_pb2.TokenizeRequest(chat=chat), metadata=metadata, timeout=10)
    print("prompt tokens:", len(tokens.token_ids))

    request = dllm_pb2.GenerateRequest(
        chat=chat, max_new_tokens=16,
        decoding=dllm_pb2.DecodingOptions(temperature=0.7, seed=42),
        cache=dllm_pb2.CacheOptions(policy=dllm_pb2.CACHE_POLICY_ENTROPY))
    unary = stub.Generate(request, metadata=metadata, timeout=60)
    print("generate:", repr(unary.text), dllm_pb2.FinishReason.Name(unary.finish_reason),
          "steps", unary.cache_stats.steps, "refresh_ratio", unary.cache_stats.refresh_ratio)

    text, final = "", None
    for message in stub.GenerateStream(request, metadata=metadata, timeout=60):
        if message.HasField("committed"):
            text += message.committed.text
        elif message.HasField("final"):
            final = message.final
    print("stream:", repr(text))

    # Each answer token's log-probability at the step that committed it, with 2 alternatives.
    scored = stub.Generate(dllm_pb2.GenerateRequest(
        chat=chat, max_new_tokens=16, decoding=dllm_pb2.DecodingOptions(temperature=0.7, seed=42),
        cache=dllm_pb2.CacheOptions(policy=dllm_pb2.CACHE_POLICY_ENTROPY), logprobs=2),
        metadata=metadata, timeout=60)
    for t in scored.logprobs[:3]:
        print("logprob: %r %.4f alternatives %s" % (t.token_bytes, t.logprob,
              [(a.token_bytes, round(a.logprob, 4)) for a in t.top_logprobs]))

    # Three completions of one request, with seeds 42, 43 and 44, batched together; each
    # choice has its own text, finish reason and status (a failed one carries `error`).
    def sampled(seed, n=None):
        return dllm_pb2.GenerateRequest(
            chat=chat, max_new_tokens=16, n=n,
            decoding=dllm_pb2.DecodingOptions(temperature=0.7, seed=seed),
            cache=dllm_pb2.CacheOptions(policy=dllm_pb2.CACHE_POLICY_ENTROPY))
    three = stub.Generate(sampled(42, n=3), metadata=metadata, timeout=60)
    for c in three.choices:
        print("choice %d: %r" % (c.index, c.text))
    streamed, finals = {}, {}
    for message in stub.GenerateStream(sampled(42, n=3), metadata=metadata, timeout=60):
        i = message.choice_index
        if message.HasField("committed"):
            streamed[i] = streamed.get(i, "") + message.committed.text
        elif message.HasField("final"):
            finals[i] = message.final

    if args.check:
        assert info.family == "llada" and info.vocab_size > 0, info
        assert len(tokens.token_ids) > 0 and tokens.rendered, tokens
        assert unary.usage.prompt_tokens == len(tokens.token_ids), (unary.usage, tokens)
        assert unary.finish_reason in (dllm_pb2.FINISH_REASON_EOS, dllm_pb2.FINISH_REASON_LENGTH)
        assert unary.cache_stats.steps > 0
        assert final is not None and final.text == unary.text == text, (final, unary.text, text)
        assert not unary.logprobs  # only when asked
        assert scored.token_ids == unary.token_ids  # asking changes no token
        assert [t.token_id for t in scored.logprobs] == list(scored.token_ids)
        assert all(t.logprob <= 0 and len(t.top_logprobs) == 2 for t in scored.logprobs)
        assert all(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob for t in scored.logprobs)
        # n: choice i is the single request with seed 42 + i, unary and streamed.
        assert [c.index for c in three.choices] == [0, 1, 2], three
        assert not three.text and not three.token_ids, three  # the answers are the choices'
        for i, c in enumerate(three.choices):
            alone = unary if i == 0 else stub.Generate(sampled(42 + i), metadata=metadata,
                                                       timeout=60)
            assert not c.HasField("error"), c
            assert (c.text, list(c.token_ids)) == (alone.text, list(alone.token_ids)), (i, c)
            assert streamed.get(i, "") == c.text and finals[i].text == c.text, (i, streamed)
            assert finals[i].index == i, finals[i]
        assert three.usage.prompt_tokens == unary.usage.prompt_tokens, three.usage
        assert three.usage.generated_tokens == sum(c.usage.generated_tokens
                                                   for c in three.choices), three.usage
        for n, why in ((0, "n: 0 must be >= 1"), (1000, "exceeds limits.max_choices")):
            try:
                stub.Generate(sampled(42, n=n), metadata=metadata, timeout=10)
                raise AssertionError("n=%d was accepted" % n)
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
                assert why in e.details(), e.details()
        try:
            stub.Generate(dllm_pb2.GenerateRequest(prompt="x", max_new_tokens=0),
                          metadata=metadata, timeout=10)
            raise AssertionError("max_new_tokens=0 was accepted")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
            assert "max_new_tokens" in e.details(), e.details()
        print("all checks passed")


if __name__ == "__main__":
    main()
