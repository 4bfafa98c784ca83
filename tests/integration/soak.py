#!/usr/bin/env python3
# A soak on the namespace testbed (root): ITERATIONS iterations of a 4-rank ring
# (one agent per host), the memory (RSS) and open descriptors of the controller
# and of every agent sampled at 10%, 50% and 90% of the run. Between 10% and
# 90% nothing may grow without bound: each process keeps its descriptors, and
# its RSS grows by less than ALLOWED (a leak of a few hundred bytes per
# iteration shows over some thousand iterations). The run must end 0 with its
# results sound (`results check`).
# Prints one JSON object: per process, the samples; "problems" (empty when the
# soak held); a line per process on stderr. Exit 0 iff it held.
# Usage: soak.py TENSORWIRE WORKDIR [--name TESTBED] [--iterations N]
#        (fault_test.sh; bench/reliability.sh with more iterations)
import json, os, subprocess, sys, time

from faults import Case

HOSTS = 4
ALLOWED_RSS = 2 << 20  # bytes between the 10% and 90% samples
MARKS = (0.1, 0.5, 0.9)


def ring4(iterations):
    """A 4-rank ring: rank 0 computes, then each rank passes 256 KiB on."""
    return f"""version: 1
iterations: {iterations}
ranks: [{{id: 0}}, {{id: 1}}, {{id: 2}}, {{id: 3}}]
flows: [{{id: a, src: 0, dst: 1}}, {{id: b, src: 1, dst: 2}}, {{id: c, src: 2, dst: 3}}, {{id: d, src: 3, dst: 0}}]
ops:
  - {{id: c0, type: compute, rank: 0, duration: 1ms}}
  - {{id: s0, type: send, flow: a, bytes: 256KiB, after: [c0]}}
  - {{id: s1, type: send, flow: b, bytes: 256KiB, after: [recv:s0]}}
  - {{id: s2, type: send, flow: c, bytes: 256KiB, after: [recv:s1]}}
  - {{id: s3, type: send, flow: d, bytes: 256KiB, after: [recv:s2]}}
"""


def sample(pid):
    """(RSS bytes, open descriptors) of a process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))
        return rss, len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, StopIteration):
        return None


class Soak(Case):
    def __init__(self, tw, work, name, iterations):
        # The machinery of a fault case (start, the API, the agents), no fault.
        super().__init__(tw, "kill-running", work, name)
        self.hosts, self.iterations = HOSTS, iterations
        self.profile, self.options, self.what = ring4(iterations), [], f"soak of {iterations} iterations"
        self.result = {"case": "soak", "iterations": iterations, "hosts": HOSTS}

    def processes(self):
        """name -> pid: the controller and each agent (by its rank hint)."""
        out = {"controller": self.proc.pid}
        for r in range(self.hosts):
            pids = self.agents(r)
            if len(pids) == 1:
                out[f"agent {r}"] = pids[0]
        return out

    def run(self):
        samples = {}
        try:
            self.start()
            if not self.wait_address():
                raise RuntimeError("no address")
            for mark in MARKS:
                want = int(mark * self.iterations)
                end = time.monotonic() + 120
                while time.monotonic() < end and self.proc.poll() is None:
                    s = self.state()
                    if s and s["state"] == "running" and s["iterations_done"] >= want:
                        break
                    time.sleep(0.02)
                else:
                    self.problem(f"the run never reached iteration {want}; it exited {self.proc.poll()}")
                    break
                for name, pid in self.processes().items():
                    v = sample(pid)
                    if v:
                        samples.setdefault(name, []).append({"at": want, "rss": v[0], "fds": v[1]})
            rc = self.proc.wait(timeout=120)
            if rc != 0:
                self.problem(f"the run exited {rc}: " + open(self.err_path).read()[-300:])
            else:
                r = subprocess.run([self.tw, "results", "check", self.out], capture_output=True, text=True)
                if r.returncode != 0:
                    self.problem("results check: " + (r.stdout + r.stderr).strip()[-300:])
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            subprocess.run([self.tw, "testbed", "down", "--name", self.name], capture_output=True)
        if len(samples) != self.hosts + 1:
            self.problem(f"sampled {sorted(samples)}, not the controller and {self.hosts} agents")
        for name, s in samples.items():
            if len(s) != len(MARKS):
                self.problem(f"{name}: {len(s)} samples of {len(MARKS)}")
                continue
            if s[-1]["fds"] != s[0]["fds"]:
                self.problem(f"{name}: {s[0]['fds']} open descriptors at iteration {s[0]['at']}, {s[-1]['fds']} at {s[-1]['at']}")
            if s[-1]["rss"] - s[0]["rss"] >= ALLOWED_RSS:
                self.problem(f"{name}: RSS {s[0]['rss'] >> 10} KiB at iteration {s[0]['at']}, {s[-1]['rss'] >> 10} KiB at {s[-1]['at']}")
        self.result["processes"] = samples
        self.result["problems"] = self.problems
        return self.result


def main():
    args = sys.argv[1:]
    opt = lambda flag, default: args[args.index(flag) + 1] if flag in args else default
    tw, work = args[0], args[1]
    os.makedirs(work, exist_ok=True)
    r = Soak(os.path.realpath(tw), work, opt("--name", "tws"), int(opt("--iterations", "2000"))).run()
    for name, s in r["processes"].items():
        print(f"soak {name}: RSS {s[0]['rss'] >> 10} -> {s[-1]['rss'] >> 10} KiB, "
              f"{s[0]['fds']} -> {s[-1]['fds']} descriptors (iterations {s[0]['at']} -> {s[-1]['at']})", file=sys.stderr)
    print(json.dumps(r))
    return 0 if not r["problems"] else 1


if __name__ == "__main__":
    sys.exit(main())
