#!/usr/bin/env python3
# Faults injected into a real run on the namespace testbed (root): 3 hosts, one
# agent each, a ring of flows. Each case starts `tensorwire run --testbed 3`, waits
# for its moment (set-up, running, upload), injects its fault and then holds the
# run to what docs/protocol.md promises:
#   - the fault is detected within its documented deadline (the run leaves
#     `running`, or the agents stop when the controller is gone);
#   - the controller exits 1 with one line naming the rank and its host;
#   - nothing is left: no agent, no namespace of the testbed, no agent's
#     working directory;
#   - what was measured until then is readable (run.json, and the records of the
#     ranks that survived, through `tensorwire results rates` and `view`).
# Prints one JSON object: the case, its deadline, the measured detection and exit
# times, and "problems" (empty when the case held). Exit 0 iff it held.
# Usage: faults.py TENSORWIRE CASE WORKDIR [--name TESTBED]   (fault_test.sh,
#        bench/reliability.sh); `faults.py --list` names the cases.
import glob, json, os, re, signal, subprocess, sys, time, urllib.request

HOSTS = 3
TOKEN = "fault-test-token"


def ring(iterations, kib, compute):
    """A 3-rank ring: rank 0 computes, then each rank passes KIB on."""
    return f"""version: 1
iterations: {iterations}
ranks: [{{id: 0}}, {{id: 1}}, {{id: 2}}]
flows: [{{id: a, src: 0, dst: 1}}, {{id: b, src: 1, dst: 2}}, {{id: c, src: 2, dst: 0}}]
ops:
  - {{id: c0, type: compute, rank: 0, duration: {compute}}}
  - {{id: s0, type: send, flow: a, bytes: {kib}KiB, after: [c0]}}
  - {{id: s1, type: send, flow: b, bytes: {kib}KiB, after: [recv:s0]}}
  - {{id: s2, type: send, flow: c, bytes: {kib}KiB, after: [recv:s1]}}
"""


# name: (what, moment, rank it names (None: any; a tuple: one of them), deadline
#        in s (None: the fault is the run's own write, seen when it fails), run
#        options, profile). The deadlines are those of docs/protocol.md: a death seen by the
#        launcher or the connection at once; silence after the 1.8 s heartbeat;
#        a stalled flow after --idle-timeout; each then the 300 ms the controller
#        waits to name the cause.
CASES = {
    "kill-setup": ("SIGKILL of an agent during set-up, before the run starts", "setup", 2, 1.0, [], ring(100000, 256, "2ms")),
    "kill-running": ("SIGKILL of an agent mid-iteration", "running", 1, 1.0, [], ring(100000, 256, "2ms")),
    "kill-upload": ("SIGKILL of an agent while it uploads its results", "collecting", 1, 1.0, ["--rate", "40mbit"],
                    ring(12000, 1, "10us")),
    "stop": ("SIGSTOP of an agent (hung)", "running", 0, 2.5, [], ring(100000, 256, "2ms")),
    "link-down": ("a host's link set down mid-run", "running", 1, 2.5, [], ring(100000, 256, "2ms")),
    "reset": ("a flow's connection reset mid-run (ss -K)", "running", None, 1.0, [], ring(100000, 256, "2ms")),
    "controller-killed": ("SIGKILL of the controller mid-run", "running", None, 2.5, [], ring(100000, 256, "2ms")),
    "disk-full": ("the run directory on a 512 KiB tmpfs, full at the upload", "none", None, None, ["--iterations", "20000"], ring(20000, 1, "10us")),
    "slow-receiver": ("the link from host 1 to host 2 slowed to 8 kbit/s mid-run (--idle-timeout 3)", "running", None, 3.5,
                      ["--idle-timeout", "3"], ring(100000, 256, "2ms")),
}


# What the line must say of each fault.
REASONS = {
    "kill-setup": r"killed by signal 9|the agent disconnected",  # before or just after its hello
    "kill-running": r"the agent disconnected|killed by signal 9",
    "kill-upload": r"the agent disconnected|killed by signal 9",
    "stop": r"the agent stopped answering heartbeats",
    "link-down": r"stopped answering heartbeats|lost the controller",
    "reset": r"Connection reset by peer|connection abort",
    "slow-receiver": r"no progress for 3\.000 s; at iteration \d+: .*not (done|received)",
}


class Case:
    def __init__(self, tw, case, work, name):
        self.tw, self.case, self.work, self.name = tw, case, work, name
        self.what, self.moment, self.rank, self.deadline, self.options, self.profile = CASES[case]
        self.hosts = HOSTS
        self.problems = []
        self.out = os.path.join(work, "run")
        self.tmp = os.path.join(work, "tmp")  # the agents' TMPDIR: their working directories
        self.address = None
        self.result = {"case": case, "what": self.what, "deadline_s": self.deadline}

    def problem(self, text):
        self.problems.append(text)

    # ---- the run -------------------------------------------------------------
    def start(self):
        os.makedirs(self.tmp, exist_ok=True)
        profile = os.path.join(self.work, "ring.yaml")
        with open(profile, "w") as f:
            f.write(self.profile)
        if self.case == "disk-full":
            os.makedirs(self.out, exist_ok=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tw-fault-full", self.out], check=True)
        env = dict(os.environ, TW_TOKEN=TOKEN, TMPDIR=self.tmp)
        self.err_path = os.path.join(self.work, "run.err")
        cmd = [self.tw, "run", profile, "--testbed", str(self.hosts), "--name", self.name, "--out", self.out, "--dashboard",
               "--quiet"] + self.options
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(self.err_path, "w"), env=env,
                                     start_new_session=True)
        self.t_start = self.t_fault = time.monotonic()

    def api(self, path):
        req = urllib.request.Request(f"http://{self.address}{path}", headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(req, timeout=1) as r:
            return json.load(r)

    def state(self):
        try:
            return self.api("/api/runs")[0]
        except Exception:
            return None

    def wait_address(self):
        url = os.path.join(self.out, "dashboard.url")
        end = time.monotonic() + 20
        while time.monotonic() < end and self.proc.poll() is None:
            try:
                m = re.match(r"http://([^/]+)/", open(url).read())
                if m:
                    self.address = m.group(1)
                    return True
            except OSError:
                pass
            time.sleep(0.01)
        self.problem("the controller never published its address")
        return False

    def agents(self, rank=None):
        """Agent processes of this run (pids), of one rank or all."""
        if self.address is None:
            return []
        pattern = f"--controller {self.address}" + (f" --rank-hint {rank} " if rank is not None else "")
        r = subprocess.run(["pgrep", "-f", "--", pattern], capture_output=True, text=True)
        return [int(p) for p in r.stdout.split() if int(p) != os.getpid()]

    def wait_moment(self):
        """Until the case's moment; False (with a problem) if it never came."""
        end = time.monotonic() + 30
        if self.moment == "setup":
            # Hold rank 2's agent as soon as it exists: the run cannot start without it.
            while time.monotonic() < end and self.proc.poll() is None:
                pids = self.agents(self.rank)
                if pids:
                    for p in pids:
                        os.kill(p, signal.SIGSTOP)
                    self.held = pids
                    break
                time.sleep(0.002)
            while time.monotonic() < end and self.proc.poll() is None:
                s = self.state()
                if s and s["state"] in ("joining", "connecting", "syncing"):
                    self.result["state_at_fault"] = s["state"]
                    return True
                time.sleep(0.01)
        elif self.moment == "running":
            while time.monotonic() < end and self.proc.poll() is None:
                s = self.state()
                if s and s["state"] == "running" and s["iterations_done"] >= 20:
                    self.result["iterations_at_fault"] = s["iterations_done"]
                    return True
                time.sleep(0.02)
        elif self.moment == "collecting":
            while time.monotonic() < end and self.proc.poll() is None:
                s = self.state()
                if s and s["state"] == "collecting":
                    self.result["state_at_fault"] = s["state"]
                    return True
                time.sleep(0.005)
        else:
            return True
        self.problem(f"the run never reached its moment ({self.moment}); it exited {self.proc.poll()}")
        return False

    # ---- the faults ------------------------------------------------------------
    def inject(self):
        c = self.case
        if c == "kill-setup":
            for p in self.held:
                os.kill(p, signal.SIGKILL)
        elif c in ("kill-running", "kill-upload"):
            for p in self.agents(self.rank):
                os.kill(p, signal.SIGKILL)
        elif c == "stop":
            self.stopped = self.agents(self.rank)
            for p in self.stopped:
                os.kill(p, signal.SIGSTOP)
        elif c == "link-down":
            subprocess.run(["ip", "link", "set", f"{self.name}-v1", "down"], check=True)
        elif c == "reset":
            # Host 1's connections to host 2: the data flow b (its control
            # connection goes to the bridge's address).
            st = json.loads(subprocess.run([self.tw, "testbed", "status", "--name", self.name, "--json"],
                                           capture_output=True, text=True, check=True).stdout)
            a2 = st["host_list"][2]["address"]
            r = subprocess.run(["ip", "netns", "exec", f"{self.name}-h1", "ss", "-K", "dst", a2], capture_output=True, text=True)
            self.result["reset"] = len([l for l in r.stdout.splitlines() if "ESTAB" in l])
            if self.result["reset"] == 0:
                self.problem("ss -K found no connection from host 1 to host 2: " + r.stdout + r.stderr)
        elif c == "controller-killed":
            self.agents_before = self.agents()
            self.proc.send_signal(signal.SIGKILL)
        elif c == "disk-full":
            pass  # the results start to arrive: the disk fills
        elif c == "slow-receiver":
            subprocess.run([self.tw, "testbed", "up", "--hosts", str(self.hosts), "--name", self.name, "--pair", "1-2:rate=8kbit"],
                           check=True, capture_output=True)
        self.t_fault = time.monotonic()

    def wait_detected(self):
        """Seconds from the fault until it was seen; None if not within 30 s."""
        end = self.t_fault + 30
        while time.monotonic() < end:
            if self.case == "controller-killed":
                if not self.agents():
                    return time.monotonic() - self.t_fault
            else:
                if self.proc.poll() is not None:
                    return time.monotonic() - self.t_fault
                s = self.state()
                if s is not None and s["state"] in ("stopping", "failed"):
                    return time.monotonic() - self.t_fault
            time.sleep(0.01)
        return None

    # ---- what must hold afterwards ---------------------------------------------
    def check_exit(self):
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.problem("the controller was still running 30 s after the fault")
            self.proc.kill()
            rc = self.proc.wait()
        self.result["exit_s"] = round(time.monotonic() - self.t_fault, 3)
        self.result["exit"] = rc
        err = open(self.err_path).read()
        lines = [l for l in err.splitlines() if l.startswith("tensorwire run: rank ")]
        self.result["line"] = lines[-1] if lines else (err.strip().splitlines() or [""])[-1]
        if self.case == "controller-killed":
            if rc != -signal.SIGKILL:
                self.problem(f"the controller exited {rc}, not by its SIGKILL")
            return
        if rc != 1:
            self.problem(f"the controller exited {rc}, not 1")
        if self.case == "disk-full":
            if "No space left on device" not in err or self.out not in err:
                self.problem("no line naming the run directory and the full disk: " + err[-400:])
            return
        # "rank R (HOST, ADDR:PORT, pid N): why", or before it joined
        # "rank R (not joined): agent in namespace HOST ...".
        m = re.match(r"tensorwire run: rank (\d+) \(([^,]+), [0-9.]+:\d+, pid \d+\): ", self.result["line"]) or \
            re.match(r"tensorwire run: rank (\d+) \(not joined\): agent in namespace ([^ ]+) ", self.result["line"])
        if not m:
            self.problem("no line naming a rank and its host: " + " / ".join(err.strip().splitlines()[-4:]))
            return
        rank, host = int(m.group(1)), m.group(2)
        if not re.search(REASONS[self.case], self.result["line"]):
            self.problem(f"the line does not say /{REASONS[self.case]}/")
        wanted = self.rank if isinstance(self.rank, tuple) else (self.rank,)
        if self.rank is not None and rank not in wanted:
            self.problem(f"the line names rank {rank}, not {' or '.join(map(str, wanted))}")
        if host != f"{self.name}-h{rank}":
            self.problem(f"the line names host {host}, not {self.name}-h{rank}")
        self.result["named_rank"] = rank

    def leftovers(self):
        left = []
        left += [f"process {p}" for p in self.agents()]
        left += [f"namespace {n.split()[0]}" for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines()
                 if n.startswith(self.name + "-h")]
        if os.path.exists(f"/sys/class/net/{self.name}-br"):
            left.append(f"bridge {self.name}-br")
        left += glob.glob(os.path.join(self.tmp, "tensorwire-agent-*"))
        return left

    def check_leftovers(self):
        end = time.monotonic() + 10
        while True:
            left = self.leftovers()
            if not left:
                self.result["clean_s"] = round(time.monotonic() - self.t_fault, 3)
                return
            if time.monotonic() > end:
                self.problem("left behind 10 s after the exit: " + ", ".join(left))
                return
            time.sleep(0.05)

    def check_readable(self):
        if self.case == "controller-killed":
            # Nothing was collected; the agents must not have left their files
            # either (checked above). The run directory says how far it got.
            return
        # Only whole files: no upload cut off, no merge half done.
        partial = glob.glob(os.path.join(self.out, "*.agent")) + glob.glob(os.path.join(self.out, "*.tmp"))
        if partial:
            self.problem("partial files left in the run directory: " + ", ".join(partial))
        run_json = os.path.join(self.out, "run.json")
        if self.case == "disk-full":
            # What fitted must read whole; run.json itself may not have fitted.
            self.result["kept"] = sorted(os.path.basename(p) for p in glob.glob(os.path.join(self.out, "*.json")))
            for p in glob.glob(os.path.join(self.out, "*.json")):
                try:
                    json.load(open(p))
                except ValueError as e:
                    self.problem(f"{p} is not whole: {e}")
            return
        try:
            run = json.load(open(run_json))
        except (OSError, ValueError) as e:
            self.problem(f"{run_json}: {e}")
            return
        if not run.get("error"):
            self.problem(f"{run_json} records no error")
        if self.moment == "setup":
            return  # nothing measured yet
        have = sorted(int(re.search(r"rank-(\d+)\.twr$", p).group(1)) for p in glob.glob(os.path.join(self.out, "rank-*.twr")))
        self.result["ranks_kept"] = have
        if len(have) < self.hosts - 1:
            self.problem(f"only the records of ranks {have} were kept")
        for cmd in (["results", "rates", self.out], ["view", self.out, "-o", os.path.join(self.work, "t.pftrace")]):
            r = subprocess.run([self.tw] + cmd, capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                self.problem(f"tensorwire {' '.join(cmd[:2])} of the failed run: {r.stderr.strip()}")
        # analyze: the failed run's records analysed, saying the run failed; or,
        # with a rank's records lost or no iteration complete, one line naming it.
        r = subprocess.run([self.tw, "analyze", self.out], capture_output=True, text=True, timeout=120)
        first = (r.stdout.splitlines() or [""])[0]
        if r.returncode == 0 and "the run failed" not in first:
            self.problem(f"tensorwire analyze of the failed run does not say it failed: {first}")
        if r.returncode != 0 and (len(r.stderr.strip().splitlines()) != 1 or self.out not in r.stderr):
            self.problem(f"tensorwire analyze of the failed run: not one line naming it: {r.stderr.strip()}")

    def run(self):
        try:
            self.start()
            if self.wait_address() and self.wait_moment():
                self.inject()
                d = self.wait_detected()
                self.result["detected_s"] = None if d is None else round(d, 3)
                if d is None:
                    self.problem("not detected within 30 s")
                elif self.deadline is not None and d > self.deadline:
                    self.problem(f"detected in {d:.2f} s, beyond its deadline of {self.deadline} s")
            self.check_exit()
            self.check_leftovers()
            self.check_readable()
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            for p in getattr(self, "stopped", []) or []:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            subprocess.run([self.tw, "testbed", "down", "--name", self.name], capture_output=True)
            if self.case == "disk-full":
                subprocess.run(["umount", self.out], capture_output=True)
        self.result["problems"] = self.problems
        return self.result


def main():
    if sys.argv[1:] == ["--list"]:
        print(" ".join(CASES))
        return 0
    tw, case, work = sys.argv[1], sys.argv[2], sys.argv[3]
    name = sys.argv[5] if len(sys.argv) > 5 and sys.argv[4] == "--name" else "twf"
    if case not in CASES:
        print(f"unknown case {case}; cases: {' '.join(CASES)}", file=sys.stderr)
        return 2
    os.makedirs(work, exist_ok=True)
    r = Case(os.path.realpath(tw), case, work, name).run()
    print(json.dumps(r))
    return 0 if not r["problems"] else 1


if __name__ == "__main__":
    sys.exit(main())
