#!/usr/bin/python3
"""Static checks of docker/Dockerfile, docker/Dockerfile.cpu and .dockerignore (no Docker
engine needed). Standard library only.

  check_docker.py <repo root>

Checks: the build stage runs the CI scripts (scripts/deps, scripts/build); the final stage
runs as a numeric non-root user, has a HEALTHCHECK using docker/healthcheck, exposes and
passes the same ports as the Kubernetes Deployment, and selects the right backend; every
COPY source exists and survives .dockerignore; .dockerignore keeps every file the build
needs and drops weights, build trees and VCS data. Exit 77 (skip) only when everything
else passed but config/default.yaml, which the images copy, does not exist yet.
"""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1
                    else pathlib.Path(__file__).parents[2]).resolve()
errors = []
missing_config = False


def dockerignore_patterns():
    pats = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pat = line[1:] if negate else line
        pat = pat.strip("/")
        rx = ""
        i = 0
        while i < len(pat):
            if pat.startswith("**/", i):
                rx += "(?:.*/)?"
                i += 3
            elif pat.startswith("**", i):
                rx += ".*"
                i += 2
            elif pat[i] == "*":
                rx += "[^/]*"
                i += 1
            elif pat[i] == "?":
                rx += "[^/]"
                i += 1
            else:
                rx += re.escape(pat[i])
                i += 1
        pats.append((re.compile(rx + r"\Z"), negate))
    return pats


PATTERNS = dockerignore_patterns()


def ignored(rel: str) -> bool:
    """Docker semantics: the last matching pattern wins; a match on a parent directory
    excludes everything below it."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    result = False
    for rx, negate in PATTERNS:
        if any(rx.match(p) for p in prefixes):
            result = not negate
    return result


def parse(dockerfile: pathlib.Path):
    """Returns (args, stages); each stage is (base image, [(instruction, text)])."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    args, stages = {}, []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instr, _, rest = line.partition(" ")
        instr = instr.upper()
        if instr == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name.strip()] = default.strip().strip('"')
        elif instr == "FROM":
            image = rest.split()[0]
            image = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), image)
            stages.append((image, []))
        elif stages:
            stages[-1][1].append((instr, rest.strip()))
    return args, stages


def deployment_ports():
    text = (ROOT / "deploy" / "k8s" / "base" / "deployment.yaml").read_text()
    return {int(p) for p in re.findall(r"containerPort:\s*(\d+)", text)}


def check_dockerfile(name: str, backend: str):
    global missing_config
    path = ROOT / "docker" / name
    _, stages = parse(path)
    where = f"docker/{name}"
    if len(stages) < 2:
        errors.append(f"{where}: want a multi-stage build (builder + runtime), "
                      f"got {len(stages)} stage(s)")
        return
    for image, _ in stages:
        if not re.fullmatch(r"debian:12(-slim)?", image):
            errors.append(f"{where}: stage FROM {image}: scripts/deps targets Debian 12 "
                          "(debian:12)")
    build_runs = " ".join(t for _, body in stages[:-1] for i, t in body if i == "RUN")
    for script in ("scripts/deps", "scripts/build"):
        if not re.search(rf"(^|[\s;&|]){re.escape(script)}\b", build_runs):
            errors.append(f"{where}: the build stage must run {script} (the CI script), "
                          "not its own recipe")
    if backend == "cuda" and "-DDLLM_CUDA=ON" not in build_runs:
        errors.append(f"{where}: CUDA image must build with -DDLLM_CUDA=ON")
    if backend == "cpu" and "-DDLLM_CUDA=OFF" not in build_runs:
        errors.append(f"{where}: CPU image must build with -DDLLM_CUDA=OFF")
    final = stages[-1][1]
    users = [t for i, t in final if i == "USER"]
    if not users or not re.fullmatch(r"[1-9]\d*(:\d+)?", users[-1]):
        errors.append(f"{where}: final stage must end with a numeric non-root USER (got {users})")
    checks = [t for i, t in final if i == "HEALTHCHECK"]
    if not checks or "/opt/dllm/bin/healthcheck" not in checks[-1]:
        errors.append(f"{where}: final stage needs HEALTHCHECK ... /opt/dllm/bin/healthcheck")
    build_text = " ".join(t for _, body in stages for _, t in body)
    if "docker/healthcheck" not in build_text:
        errors.append(f"{where}: docker/healthcheck is never copied into the image")
    entry = " ".join(t for i, t in final if i in ("ENTRYPOINT", "CMD"))
    if "/opt/dllm/bin/dllm-server" not in entry:
        errors.append(f"{where}: ENTRYPOINT must run /opt/dllm/bin/dllm-server")
    if f'"--backend", "{backend}"' not in entry:
        errors.append(f"{where}: CMD must pass --backend {backend}")
    exposed = {int(p.split("/")[0]) for i, t in final if i == "EXPOSE" for p in t.split()}
    if exposed != deployment_ports():
        errors.append(f"{where}: EXPOSE {sorted(exposed)} differs from the Deployment's "
                      f"containerPorts {sorted(deployment_ports())}")
    for port in exposed:
        if f'"{port}"' not in entry:
            errors.append(f"{where}: CMD does not pass port {port} explicitly")
    for _, body in stages:
        for instr, text in body:
            if instr != "COPY" or "--from=" in text:
                continue
            srcs = [s for s in text.split()[:-1] if not s.startswith("--")]
            for src in srcs:
                if src == ".":
                    continue
                if not (ROOT / src).exists():
                    if src == "config/default.yaml":
                        missing_config = True
                    else:
                        errors.append(f"{where}: COPY source {src} does not exist")
                if ignored(src):
                    errors.append(f"{where}: COPY source {src} is excluded by .dockerignore")


def check_dockerignore():
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True,
                             text=True, check=True).stdout.split()
    cmake = (ROOT / "CMakeLists.txt").read_text()
    needed_dirs = [d for d in re.findall(r"add_subdirectory\((\w+)\)", cmake) if d != "tests"]
    needed_prefixes = tuple(f"{d}/" for d in needed_dirs + ["scripts", "docker", "config"])
    needed = [f for f in tracked if f.startswith(needed_prefixes) or f == "CMakeLists.txt"]
    for f in needed:
        if ignored(f):
            errors.append(f".dockerignore excludes {f}, which the image build needs")
    if not any(f.startswith("engine/") for f in needed):
        errors.append("found no tracked engine/ sources: is this a git checkout?")
    for f in (".git/HEAD", "models/llada-8b/model-00001.safetensors", "build/bin/dllm-server",
              "build-foo/CMakeCache.txt", "tests/deploy/node_modules/yaml/package.json",
              "weights.safetensors"):
        if not ignored(f):
            errors.append(f".dockerignore should exclude {f}")


def main() -> int:
    check_dockerfile("Dockerfile", "cuda")
    check_dockerfile("Dockerfile.cpu", "cpu")
    check_dockerignore()
    for script in ("healthcheck", "collect-runtime-libs"):
        p = ROOT / "docker" / script
        r = subprocess.run(["sh", "-n", str(p)], capture_output=True, text=True)
        if r.returncode != 0 or not p.stat().st_mode & 0o111:
            errors.append(f"docker/{script}: not an executable, valid sh script: "
                          f"{r.stderr.strip()}")
    if errors:
        for e in errors:
            print(f"FAIL {e}")
        return 1
    if missing_config:
        print("SKIP: all Dockerfile checks passed, but config/default.yaml (copied into the "
              "images) does not exist yet")
        return 77
    print("ok Dockerfile, Dockerfile.cpu, .dockerignore")
    return 0


if __name__ == "__main__":
    sys.exit(main())
