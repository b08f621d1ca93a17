#!/usr/bin/python3
"""Static checks that scripts/image (podman builds with local Debian 12 bases) agrees with the
Dockerfiles, the server config, the task data and scripts/deps. No container engine needed;
standard library only. What tests/deploy/check_docker.py covers (stages, USER, HEALTHCHECK,
EXPOSE vs the Deployment, .dockerignore) is not repeated here.

  check_image_script.py <repo root>
  check_image_script.py <repo root> --self-test

Checks:
  * every --build-arg scripts/image passes is an ARG of the Dockerfile it builds, and every
    ARG a FROM uses is passed (else podman --pull-never fails, or the image silently comes
    from a registry base); the CUDA toolkit volume lands where docker/Dockerfile looks for it;
  * the builds use --format docker (the OCI format drops HEALTHCHECK);
  * the run publishes every EXPOSEd port, and the HTTP port it publishes is the one it passes;
  * its stop limit is config/default.yaml's lame duck + drain timeout + 1 s, read from the
    config's keys (which must exist);
  * its test prompts and answers are a pair in tools/tasks/data/test.jsonl;
  * scripts/deps honours DLLM_DEPS_NODE (set by the Dockerfiles) and its pinned Node.js
    satisfies every engines.node in tests/*/package-lock.json;
  * pristine runs the whole suite unless DLLM_PRISTINE_TESTS narrows it, and a test that
    fails in the suite and passes alone fails the run (a nonzero exit after FLAKY).
--self-test breaks each agreement in memory and fails unless every break is caught.
"""
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--")
                    else pathlib.Path(__file__).parents[2]).resolve()
FILES = ["scripts/image", "scripts/deps", "docker/Dockerfile", "docker/Dockerfile.cpu",
         "config/default.yaml", "tools/tasks/data/test.jsonl",
         "tests/deploy/package-lock.json", "tests/http/package-lock.json"]


def function_body(script: str, name: str) -> str:
    m = re.search(rf"^{name}\(\) \{{[^\n]*\n(.*?)^\}}", script, re.S | re.M)
    return m.group(1) if m else ""


def dockerfile_args(text: str):
    """(all ARG names, ARG names used in FROM lines)."""
    text = re.sub(r"\\\n", " ", text)
    names = set(re.findall(r"^\s*ARG\s+(\w+)", text, re.M))
    used = set()
    for line in re.findall(r"^\s*FROM\s+(.*)$", text, re.M):
        used |= set(re.findall(r"\$\{?(\w+)", line))
    return names, used


def build_args(snippet: str):
    return set(re.findall(r"--build-arg\s+\"?(\w+)=", snippet))


def shell_var(script: str, name: str):
    m = re.search(rf"^{name}=(\"[^\"\n]*\"|\S*)", script, re.M)
    return m.group(1).strip('"') if m else None


def check(t: dict) -> list:
    errors = []
    image = t["scripts/image"]
    cpu_body, cuda_body = function_body(image, "build_cpu"), function_body(image, "build_cuda")
    if not cpu_body or not cuda_body:
        return ["scripts/image: functions build_cpu and build_cuda not found"]
    m = re.search(r"^BUILD_ARGS=\((.*?)\)", image, re.M | re.S)
    common = build_args(m.group(1)) if m else set()
    if not common:
        errors.append("scripts/image: no BUILD_ARGS=(--build-arg ...) found")
    for body, fn, dockerfile in ((cpu_body, "build_cpu", "docker/Dockerfile.cpu"),
                                 (cuda_body, "build_cuda", "docker/Dockerfile")):
        if f"-f {dockerfile} " not in body:
            errors.append(f"scripts/image {fn}: does not build -f {dockerfile}")
            continue
        passed = build_args(body) | (common if "BUILD_ARGS[@]" in body else set())
        names, from_args = dockerfile_args(t[dockerfile])
        for a in sorted(passed - names):
            errors.append(f"scripts/image {fn}: --build-arg {a}, but {dockerfile} has no ARG {a}")
        for a in sorted(from_args - passed):
            errors.append(f"{dockerfile}: FROM uses ${{{a}}}, which scripts/image {fn} does "
                          "not set (the image would need a registry)")
        if "BUILD_OPTS[@]" not in body:
            errors.append(f"scripts/image {fn}: does not use BUILD_OPTS")
    m = re.search(r"^BUILD_OPTS=\((.*?)\)", image, re.M | re.S)
    if not m or "--format docker" not in m.group(1):
        errors.append("scripts/image: BUILD_OPTS lacks --format docker "
                      "(OCI images drop HEALTHCHECK)")

    # The CUDA toolkit: a build volume at the path docker/Dockerfile checks with CUDA_APT=0.
    if "CUDA_APT=0" not in cuda_body:
        errors.append("scripts/image build_cuda: does not pass CUDA_APT=0")
    vol = re.search(r'-v\s+"?\$cuda_home:([^:"\s]+)', cuda_body)
    if not vol:
        errors.append("scripts/image build_cuda: no -v \"$cuda_home:<path>\" toolkit volume")
    elif f"{vol.group(1)}/bin/nvcc" not in t["docker/Dockerfile"]:
        errors.append(f"docker/Dockerfile: does not look for nvcc under {vol.group(1)}, where "
                      "scripts/image mounts the toolkit")

    # Ports: every EXPOSEd port published; the HTTP port published is the one passed.
    run_body = function_body(image, "run_checks")
    published = {int(p) for p in re.findall(r"-p \"127\.0\.0\.1:\$\w+:(\d+)\"", run_body)}
    for dockerfile in ("docker/Dockerfile", "docker/Dockerfile.cpu"):
        exposed = {int(p) for line in re.findall(r"^\s*EXPOSE\s+(.*)$", t[dockerfile], re.M)
                   for p in re.findall(r"\d+", line)}
        if not exposed <= published:
            errors.append(f"scripts/image run_checks: publishes {sorted(published)}, {dockerfile} "
                          f"EXPOSEs {sorted(exposed)}")
    http = re.search(r"--http-port (\d+)", run_body)
    if not http or int(http.group(1)) not in published:
        errors.append("scripts/image run_checks: passes no --http-port it also publishes")

    # Stop limit = the lame duck and drain timeout of the config the image ships.
    for var, key in (("LAME_DUCK_S", "lame_duck_seconds"),
                     ("DRAIN_TIMEOUT_S", "drain_timeout_seconds")):
        line = re.search(rf"^{var}=(.*)$", image, re.M)
        reads = line.group(1) if line else ""
        if f'"{key}:"' not in reads or "config/default.yaml" not in reads:
            errors.append(f"scripts/image: {var} is not read from config/default.yaml's {key}")
        if not re.search(rf"^\s*{key}:\s*\d+", t["config/default.yaml"], re.M):
            errors.append(f"config/default.yaml: no server.{key}, which scripts/image reads")
    if not re.search(r"stop_bound_s=\$\(\(LAME_DUCK_S \+ DRAIN_TIMEOUT_S \+ 1\)\)", image):
        errors.append("scripts/image: the stop bound is not lame duck + drain timeout + 1 s")

    # Pristine: the whole suite by default; a flaky test fails the run.
    if not re.search(r"local tests=\$\{DLLM_PRISTINE_TESTS:-\}", image):
        errors.append("scripts/image pristine: does not run the whole suite by default")
    if not re.search(r'FLAKY[^\n]*\n\s*exit [1-9]', image):
        errors.append("scripts/image pristine: a test that fails then passes alone does not "
                      "fail the run")

    # Prompts the shipped model answers: pairs of the task suite's test set.
    tasks = {}
    for line in t["tools/tasks/data/test.jsonl"].splitlines():
        if line.strip():
            x = json.loads(line)
            tasks[x["prompt"]] = x["answer"]
    for p, a in (("PROMPT", "ANSWER"), ("CHAT_PROMPT", "CHAT_ANSWER")):
        prompt, answer = shell_var(image, p), shell_var(image, a)
        if prompt is None or tasks.get(prompt) != answer:
            errors.append(f"scripts/image: {p}={prompt!r} / {a}={answer!r} is not a prompt and "
                          "answer of tools/tasks/data/test.jsonl")

    # scripts/deps: the knob the Dockerfiles set, and Node.js new enough for the lock files.
    deps = t["scripts/deps"]
    for dockerfile in ("docker/Dockerfile", "docker/Dockerfile.cpu"):
        for var in re.findall(r"(\w+)=\S+\s+scripts/deps", t[dockerfile]):
            if var not in deps:
                errors.append(f"{dockerfile}: sets {var} for scripts/deps, which never reads it")
    node = shell_var(deps, "NODE_VERSION")
    if node is None:
        errors.append("scripts/deps: no NODE_VERSION")
    else:
        major = int(node.split(".")[0])
        for lock in ("tests/deploy/package-lock.json", "tests/http/package-lock.json"):
            for req in re.findall(r'"node":\s*">=\s*(\d+)', t[lock]):
                if major < int(req):
                    errors.append(f"scripts/deps: Node.js {node} < {req}, which {lock} requires")
    return errors


def self_test(t: dict) -> int:
    breaks = {
        "a build arg the Dockerfile lacks": ("docker/Dockerfile.cpu", "ARG DEBIAN_IMAGE",
                                             "ARG DEBIAN_BASE"),
        "a FROM argument not passed": ("scripts/image", '--build-arg "RUNTIME_IMAGE=$SLIM"', ""),
        "OCI format": ("scripts/image", "--format docker", "--format oci"),
        "toolkit path": ("scripts/image", '"$cuda_home:/usr/local/cuda:ro"',
                         '"$cuda_home:/opt/cuda:ro"'),
        "drain timeout key": ("config/default.yaml", "drain_timeout_seconds: 30",
                              "drain_timeout: 30"),
        "stop bound without the lame duck": ("scripts/image",
                                             "LAME_DUCK_S + DRAIN_TIMEOUT_S + 1",
                                             "DRAIN_TIMEOUT_S + 1"),
        "a subset by default": ("scripts/image", "local tests=${DLLM_PRISTINE_TESTS:-}",
                                "local tests=${DLLM_PRISTINE_TESTS:-^server:}"),
        "flaky passes": ("scripts/image", "$failed\"\n  exit 3", "$failed\""),
        "wrong answer": ("scripts/image", 'ANSWER="10"', 'ANSWER="11"'),
        "unpublished port": ("scripts/image", '-p "127.0.0.1:$HOST_METRICS:9400"', ""),
        "old Node.js": ("scripts/deps", "NODE_VERSION=22.", "NODE_VERSION=18."),
        "unread knob": ("scripts/deps", "DLLM_DEPS_NODE", "DLLM_NODE"),
    }
    baseline = check(t)
    if baseline:
        print("\n".join(f"FAIL (unbroken) {e}" for e in baseline))
        return 1
    failed = 0
    for what, (path, old, new) in breaks.items():
        if old not in t[path]:
            print(f"FAIL self-test '{what}': '{old}' not in {path}")
            failed += 1
            continue
        broken = dict(t, **{path: t[path].replace(old, new)})
        errs = check(broken)
        print(f"{'ok' if errs else 'FAIL'} self-test '{what}': {errs[0] if errs else 'not caught'}")
        failed += not errs
    return 1 if failed else 0


def main() -> int:
    args = sys.argv[1:]
    t = {f: (ROOT / f).read_text() for f in FILES}
    if "--self-test" in args:
        return self_test(t)
    errors = check(t)
    for e in errors:
        print(f"FAIL {e}")
    if not errors:
        print("ok scripts/image agrees with the Dockerfiles, config, task data and scripts/deps")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
