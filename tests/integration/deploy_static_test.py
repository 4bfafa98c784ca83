#!/usr/bin/python3
"""Static checks of docker/ (no Docker engine or cluster runs here): every YAML
file parses; every path the files name exists in the repository; every tensorwire
command they run names a real subcommand and real options; the image is built
with the same install script CI runs, and its runtime packages provide every
shared library the binary needs; Kubernetes objects refer to each other
consistently. Usage: deploy_static_test.py TENSORWIRE_BINARY SOURCE_DIR"""
import os, re, shlex, subprocess, sys
import yaml

tw, src = sys.argv[1], sys.argv[2]
failures = []
checks = 0

def check(ok, what):
    global checks
    checks += 1
    if not ok:
        failures.append(what)

help_cache = {}
def help_of(sub):
    if sub not in help_cache:
        r = subprocess.run([tw, sub, "--help"], capture_output=True, text=True)
        help_cache[sub] = r.stdout if r.returncode == 0 else None
    return help_cache[sub]

def check_command(words, where):
    """A tensorwire command line: subcommand, options, and bundled paths."""
    if words and words[0].endswith("tensorwire"):
        words = words[1:]
    check(bool(words), f"{where}: empty command")
    if not words:
        return
    text = help_of(words[0])
    check(text is not None, f"{where}: no subcommand '{words[0]}'")
    if text is None:
        return
    for w in words[1:]:
        if w.startswith("--"):
            opt = w.split("=")[0]
            check(re.search(r"(^|[\s,])" + re.escape(opt) + r"\b", text) is not None, f"{where}: '{words[0]}' has no option {opt}")
        if w.startswith("/usr/share/tensorwire/"):
            rel = w[len("/usr/share/tensorwire/"):]
            check(os.path.exists(os.path.join(src, rel)), f"{where}: {w} is not in the repository ({rel})")

docker = os.path.join(src, "docker")
docs = {}
for root, _, files in os.walk(docker):
    for f in files:
        if f.endswith((".yaml", ".yml")):
            path = os.path.join(root, f)
            try:
                docs[os.path.relpath(path, src)] = [d for d in yaml.safe_load_all(open(path)) if d is not None]
                checks += 1
            except yaml.YAMLError as e:
                failures.append(f"{path}: not valid YAML: {e}")

# --- Dockerfile ------------------------------------------------------------------
dockerfile = open(os.path.join(docker, "Dockerfile")).read()
for m in re.finditer(r"^COPY\s+(?!--from)(\S+)", dockerfile, re.M):
    check(os.path.exists(os.path.join(src, m.group(1))), f"Dockerfile: COPY {m.group(1)}: no such path")
check("bash scripts/install-deps.sh" in dockerfile, "Dockerfile: does not build with scripts/install-deps.sh")
ci = open(os.path.join(src, ".ci/run")).read() + open(os.path.join(src, "scripts/test.sh")).read()
check("install-deps.sh" in ci, "CI does not run scripts/install-deps.sh: the image would not build the CI way")
runtime = re.search(r"FROM debian:12-slim(.*)", dockerfile, re.S).group(1)
# Every word of the runtime stage that could be a package name (zlib1g is one
# that does not start with "lib").
packages = set(re.findall(r"\b([a-z0-9][a-z0-9.+-]+)\b", runtime))
ldd = subprocess.run(["ldd", tw], capture_output=True, text=True).stdout
# The libraries the binary itself needs (apt brings theirs along with the package).
needed = set(re.findall(r"NEEDED\s+(\S+)", subprocess.run(["objdump", "-p", tw], capture_output=True, text=True).stdout))
check(bool(needed), "objdump found no NEEDED entries in the binary")
for name, lib in re.findall(r"^\s*(\S+) => (\S+)", ldd, re.M):
    if name not in needed:
        continue
    owner = ""
    for candidate in (lib, os.path.realpath(lib), "/usr" + lib if lib.startswith("/lib") else lib):
        owner = owner or subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True).stdout.split(":")[0]
    if owner in ("libc6", "libgcc-s1", "libstdc++6"):
        continue  # in the base image
    check(owner in packages, f"Dockerfile: the runtime image lacks {owner} (for {lib})")
for m in re.finditer(r'^(?:ENTRYPOINT|CMD)\s+(\[.*\])', dockerfile, re.M):
    checks += 1

# --- compose ---------------------------------------------------------------------
compose = docs["docker/compose.yaml"][0]
services = compose["services"]
check("controller" in services, "compose: no controller service")
build = services["controller"]["build"]
check(os.path.exists(os.path.normpath(os.path.join(docker, build["context"], build["dockerfile"]))), "compose: build file missing")
agents = [s for s in services if s.startswith("agent-")]
expect = None
for name, s in services.items():
    cmd = [str(w) for w in s.get("command", [])]
    check_command(cmd, f"compose {name}")
    if "--expect" in cmd:
        expect = int(cmd[cmd.index("--expect") + 1])
        listen_port = cmd[cmd.index("--listen") + 1].rsplit(":", 1)[1]
    for d in s.get("depends_on", []):
        check(d in services, f"compose {name}: depends on unknown {d}")
    for n in s.get("networks", []):
        check(n in compose.get("networks", {}), f"compose {name}: unknown network {n}")
check(expect == len(agents), f"compose: controller expects {expect} agents, {len(agents)} defined")
for a in agents:
    cmd = [str(w) for w in services[a]["command"]]
    target = cmd[cmd.index("--controller") + 1]
    check(target == f"controller:{listen_port}", f"compose {a}: dials {target}, the controller listens on {listen_port}")

# --- Kubernetes ------------------------------------------------------------------
objs = [d for k, v in docs.items() if k.startswith("docker/k8s/") for d in v]
for o in objs:
    check(all(k in o for k in ("apiVersion", "kind", "metadata")) and "name" in o["metadata"], f"k8s: incomplete object {o}")
by_kind = {}
for o in objs:
    by_kind.setdefault(o["kind"], {})[o["metadata"]["name"]] = o
jobs, svcs, secrets = by_kind.get("Job", {}), by_kind.get("Service", {}), by_kind.get("Secret", {})
for name, svc in svcs.items():
    sel = svc["spec"]["selector"]
    matched = [j for j in jobs.values() if all(j["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in sel.items())]
    check(len(matched) == 1, f"k8s Service {name}: selects {len(matched)} jobs")
agent_job, ctl_job = jobs.get("tensorwire-agents"), jobs.get("tensorwire-controller")
check(agent_job is not None and ctl_job is not None, "k8s: agent and controller jobs")
check(agent_job["spec"].get("completionMode") == "Indexed", "k8s agents: not an Indexed Job")
check(agent_job["spec"]["template"]["spec"].get("subdomain") in svcs, "k8s agents: subdomain is not the headless Service")
for job in (agent_job, ctl_job):
    for c in job["spec"]["template"]["spec"]["containers"]:
        line = " ".join(c.get("args", []))
        words = shlex.split(line.replace("exec ", "", 1))
        check_command(words, f"k8s {job['metadata']['name']}")
        for e in c.get("env", []):
            ref = e.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                check(ref["name"] in secrets and ref["key"] in secrets[ref["name"]].get("stringData", {}), f"k8s: secret {ref} missing")
        if "--expect" in words:
            n = int(words[words.index("--expect") + 1])
            check(n == agent_job["spec"]["completions"], f"k8s: controller expects {n}, the Job has {agent_job['spec']['completions']}")
            port = int(words[words.index("--listen") + 1].rsplit(":", 1)[1])
        if "--controller" in words:
            host, p = words[words.index("--controller") + 1].rsplit(":", 1)
            check(host in svcs and any(x["port"] == int(p) for x in svcs[host]["spec"]["ports"]), f"k8s agents dial {host}:{p}: no such Service port")
ctl_svc = svcs.get("tensorwire-controller")
check(ctl_svc is not None and ctl_svc["spec"]["ports"][0]["targetPort"] == port, "k8s: the controller Service does not reach --listen's port")

# --- docs ---------------------------------------------------------------------------
deploy = open(os.path.join(src, "docs/deploy.md")).read()
for f in ("docker/Dockerfile", "docker/compose.yaml", "docker/k8s/agents.yaml", "docker/k8s/controller.yaml"):
    check(f in deploy, f"docs/deploy.md does not mention {f}")

for f in failures:
    print("FAIL:", f)
print(f"{checks - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
