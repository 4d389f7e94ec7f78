"""The service soaked under attack (issue 41, item 3).

bench_coord_load runs its job (1,024 ranks by default, one pipeline made a
straggler in the middle of the run and recovered later) against a
`joulepipe serve` it starts, while this script attacks that server in a
loop from another loopback address (127.0.0.2, a second client as an
attacker elsewhere would be) with the ways found to crash, stall or exhaust
it (docs/coordination.md, "Security"):

  2  half-sent requests (slowloris), a byte every 5 s
  3  /healthz with 1 MiB bodies
  4  profile uploads hung up halfway
  5  heavy plans (8 stages, 400 clock settings a stage) queued
  6  a rank asking for its plan in a loop with every wait slot held
  8  parked plan waits sent with 1 MiB bodies
  10 a job's first report at iteration 10^12
  11 header blocks over the connection pool
  and 300 jobs registered and deleted (the job cap); and the third round's
  (issue 61), numbered r2..r10 after its findings:
  r2  a 10 MB profile whose rows are half implausible (notes under the lock)
  r3  a profile padded with 60 MiB of comment lines (the store keeps rows)
  r4  8 uploads of a declared 60 MiB held open, unfinished, for 20 s
  r5  bursts of 16 Zeus results of 1 MiB (parsed off the HTTP thread)
  r6  2,100 half-sent requests from the ranks' own address, 127.0.0.1
  r9  clients that ask for /metrics over and over and never read
  r10 chunked bodies with a chunk-extension flood

It prints what the issue asks for: acknowledged data lost (the bench's
"every iteration completed" and "every request answered"), the ranks' p99
latency per route, the server's RSS over time, and the plan switches made.

  python3 bench/coord_soak.py --minutes 30            # about 30 minutes
  python3 bench/coord_soak.py --minutes 2 --ranks 64  # a quick look

At 256 ranks for 5 minutes (8 attack rounds, all of the above) every rank
was planned, every request answered and every iteration completed (PASS),
ranks' p99 at most 9.9 ms per route.

Everything it writes goes to --out (a new directory): bench.out (the
bench's own report), serve.out (the server's log), rss.csv (the server's
RSS every 5 s) and attack.json (each attack's outcome counts).
"""
import argparse
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ATTACKER = ("127.0.0.2", 0)


class Attacker:
    def __init__(self, port, stop):
        self.port = port
        self.stop = stop  # a threading.Event
        self.counts = {}
        self.lock = threading.Lock()

    def count(self, key, n=1):
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + n

    def conn(self, timeout=5):
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout,
                                        source_address=ATTACKER)

    def request(self, method, path, body=b"", headers=None, timeout=10):
        route = re.sub(r"/jobs/[^/?]+", "/jobs/{id}", path.split("?")[0])
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout,
                                           source_address=ATTACKER)
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            r.read()
            c.close()
            self.count(f"{method} {route} {r.status}")
            return r.status
        except Exception as e:  # refused, reset or timed out: counted by kind
            self.count(f"{method} {route} {type(e).__name__}")
            return None

    def job(self, jid, pp=8, mb=4):
        return self.request("POST", "/jobs", json.dumps({
            "job_id": jid, "pp_degree": pp, "dp_degree": 1, "tp_degree": 1,
            "schedule": "1f1b", "microbatches": mb, "p_block_w": 60.0,
            "resolution_s": 0.001}).encode(), {"Content-Type": "application/json"})

    def ranks(self, jid, pp, clocks):
        for p in range(pp):
            self.request("POST", f"/jobs/{jid}/ranks", json.dumps({
                "rank": p, "dp_rank": 0, "pp_rank": p, "tp_rank": 0,
                "available_frequencies": clocks}).encode())

    def slowloris(self, n=3000, hold_s=25):  # finding 2
        socks = []
        for _ in range(n):
            try:
                s = self.conn(2)
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                socks.append(s)
            except OSError:
                self.count("2 slowloris: connection refused or closed")
        self.count("2 slowloris: opened", len(socks))
        end = time.time() + hold_s
        while time.time() < end and not self.stop.is_set():
            for s in socks:
                try:
                    s.send(b"X")
                except OSError:
                    pass
            time.sleep(5)
        for s in socks:
            s.close()

    def healthz_bodies(self, n=300):  # finding 3
        body = b"x" * ((1 << 20) - 1)
        for _ in range(n):
            try:
                s = self.conn()
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                          % len(body))
                s.sendall(body)
                s.close()
                self.count("3 healthz body: sent whole")
            except OSError:
                self.count("3 healthz body: refused before it was sent")

    def uploads_hung_up(self, n=10, mb=25):  # finding 4
        self.job("soak-upload")
        blob = b"0,forward,1410,0.01,3\n" * (mb * (1 << 20) // 22)
        for _ in range(n):
            try:
                s = self.conn()
                s.sendall(b"PUT /jobs/soak-upload/profile HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(blob))
                s.sendall(blob[: len(blob) // 2])
                s.close()
                self.count("4 upload: hung up halfway")
            except OSError:
                self.count("4 upload: refused")
        self.request("DELETE", "/jobs/soak-upload")

    @staticmethod
    def big_profile(settings, stages=8):
        rows = ["stage,instruction,frequency,time,energy"]
        for s in range(stages):
            for k, base in (("forward", 0.01), ("backward", 0.02)):
                for i in range(settings):
                    mhz = 1410 - (i % 600)
                    t = base * 1410 / mhz * (1 + i * 1e-6)
                    rows.append(f"{s},{k},{mhz},{t:.9f},{t * 300 * mhz / 1410:.9f}")
        return ("\n".join(rows) + "\n").encode()

    def heavy_jobs(self):  # finding 5 (and 9: large stored profiles)
        profile = self.big_profile(400)
        for i in range(2):
            jid = f"soak-heavy-{i}"
            self.job(jid)
            self.ranks(jid, 8, [1410, 1200])
            self.request("PUT", f"/jobs/{jid}/profile", profile)

    def deferred_waits(self, n=3000):  # finding 6
        jid = "soak-waits"
        self.job(jid, 2)
        self.ranks(jid, 2, [1410, 1200])
        for _ in range(n):
            if self.stop.is_set():
                break
            self.request("GET", f"/jobs/{jid}/plan?rank=0&after=0&wait_s=0", timeout=3)
        self.request("DELETE", f"/jobs/{jid}")

    def parked_with_bodies(self, n=100):  # finding 8
        jid = "soak-parked"
        self.job(jid, 2)
        body = b"y" * ((1 << 20) - 1)
        socks = []
        for _ in range(n):
            try:
                s = self.conn()
                s.sendall(b"GET /jobs/%s/plan?rank=0&after=0&wait_s=20 HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Length: %d\r\n\r\n" % (jid.encode(), len(body)))
                s.sendall(body)
                socks.append(s)
            except OSError:
                self.count("8 parked with a body: refused")
        self.count("8 parked with a body: sent whole", len(socks))
        time.sleep(10)
        for s in socks:
            s.close()
        self.request("DELETE", f"/jobs/{jid}")

    def far_future(self):  # finding 10
        jid = "soak-future"
        self.job(jid, 2)
        self.ranks(jid, 2, [1410])
        self.request("POST", f"/jobs/{jid}/iterations", json.dumps({
            "rank": 0, "iteration": 10**12, "time_s": 1.0, "energy_j": 1.0}).encode())
        self.request("DELETE", f"/jobs/{jid}")

    def big_headers(self, n=50):  # finding 11
        for _ in range(n):
            self.request("GET", "/healthz", headers={"X-Big": "z" * 200000})

    def many_jobs(self, n=300):  # the job cap
        for i in range(n):
            self.job(f"soak-many-{i}", 2, 2)
        for i in range(n):
            self.request("DELETE", f"/jobs/soak-many-{i}")

    # ---- the third round (issue 61) ----

    def implausible_profile(self):  # r2
        jid = "soak-odd"
        self.job(jid, 80, 1)
        rows = ["stage,instruction,frequency,time,energy"]
        for s in range(80):
            for k in range(1000):
                power = 100 if k % 2 == 0 else 2500  # every other clock 25x its neighbours
                for kind in ("forward", "backward"):
                    rows.append(f"{s},{kind},{1800 - k},0.010000000,{0.01 * power:.9f}")
        status = self.request("PUT", f"/jobs/{jid}/profile", ("\n".join(rows) + "\n").encode(),
                              timeout=120)
        self.count(f"r2 half-implausible profile: {status}")
        self.request("DELETE", f"/jobs/{jid}")

    def padded_profile(self):  # r3
        jid = "soak-padded"
        self.job(jid, 8)
        padding = b"# padding padding padding padding padding padding padding pad\n" * (
            (60 << 20) // 64)
        body = padding + self.big_profile(20)
        status = self.request("PUT", f"/jobs/{jid}/profile", body, timeout=120)
        self.count(f"r3 padded profile: {status}")
        self.request("DELETE", f"/jobs/{jid}")

    def uploads_held_open(self, n=8, hold_s=20):  # r4
        jid = "soak-held"
        self.job(jid, 8)
        socks = []
        for _ in range(n):
            try:
                s = self.conn()
                s.sendall(b"PUT /jobs/%s/profile HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                          % (jid.encode(), 60 << 20))
                s.sendall(b"0,forward,1410,0.01,3\n" * 50000)  # about 1 MiB of it
                socks.append(s)
            except OSError:
                self.count("r4 held upload: refused before its body")
        self.stop.wait(hold_s)
        for s in socks:
            try:
                s.settimeout(0.5)
                answer = s.recv(64)
                self.count("r4 held upload: " + (answer.split(b"\r\n")[0].decode("latin-1")
                                                 if answer else "still held"))
            except OSError:
                self.count("r4 held upload: still held")
            s.close()
        self.request("DELETE", f"/jobs/{jid}")

    def zeus_results(self, n=16):  # r5
        jid = "soak-zeus"
        self.job(jid, 2)
        self.ranks(jid, 2, [1410, 1200])
        times = "[" + ",".join(["0.0500000000000001"] * 55000) + "]"
        body = ('{"rank":0,"iter_time":%s,"iter_energy":[]}' % times).encode()
        threads = [threading.Thread(target=self.request, daemon=True, args=(
            "POST", f"/result/{jid}", body, {"Content-Type": "application/json"}, 60))
            for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        self.request("DELETE", f"/jobs/{jid}")

    def same_address_slowloris(self, n=2100, hold_s=20):  # r6
        socks = []
        for _ in range(n):
            try:
                s = socket.create_connection(("127.0.0.1", self.port), timeout=2)
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                socks.append(s)
            except OSError:
                self.count("r6 same-address half-sent: refused")
        self.count("r6 same-address half-sent: opened", len(socks))
        self.stop.wait(hold_s)
        closed = 0
        for s in socks:
            try:
                s.settimeout(0.01)
                if s.recv(1) == b"":
                    closed += 1
            except OSError as e:
                closed += not isinstance(e, socket.timeout)
            s.close()
        self.count("r6 same-address half-sent: closed by the server", closed)

    def never_read(self, n=8, requests=2000, hold_s=20):  # r9
        socks = []
        one = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
        for _ in range(n):
            try:
                s = self.conn()
                s.setblocking(False)
                sent = 0
                for _ in range(requests):
                    try:
                        sent += s.send(one)
                    except BlockingIOError:
                        break
                self.count("r9 never read: requests sent", sent // len(one))
                socks.append(s)
            except OSError:
                self.count("r9 never read: refused")
        self.stop.wait(hold_s)
        for s in socks:
            s.close()

    def chunk_extensions(self, n=50):  # r10
        for _ in range(n):
            try:
                s = self.conn()
                s.sendall(b"POST /jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                          b"Content-Type: application/json\r\n\r\n1;" + b"e" * 200000 + b"\r\n{\r\n")
                s.settimeout(5)
                answer = s.recv(64)
                self.count("r10 chunk extensions: " + (answer.split(b"\r\n")[0].decode("latin-1")
                                                       if answer else "closed"))
                s.close()
            except OSError as e:
                self.count(f"r10 chunk extensions: {type(e).__name__}")

    def loop(self, log):
        steps = [self.slowloris, self.healthz_bodies, self.uploads_hung_up, self.heavy_jobs,
                 self.deferred_waits, self.parked_with_bodies, self.far_future,
                 self.big_headers, self.many_jobs,
                 self.implausible_profile, self.padded_profile, self.uploads_held_open,
                 self.zeus_results, self.same_address_slowloris, self.never_read,
                 self.chunk_extensions]
        rounds = 0
        start = time.time()
        while not self.stop.is_set():
            rounds += 1
            threads = [threading.Thread(target=f, daemon=True) for f in steps]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=600)
            for i in range(2):
                self.request("DELETE", f"/jobs/soak-heavy-{i}")
            log(f"attack round {rounds} done at {time.time() - start:.0f} s")
        return rounds


def rss_sampler(pid, path, stop):
    with open(path, "w") as f:
        f.write("t_s,rss_mib\n")
        t0 = time.time()
        while not stop.is_set():
            try:
                with open(f"/proc/{pid}/status") as status:
                    for line in status:
                        if line.startswith("VmRSS:"):
                            f.write(f"{time.time() - t0:.0f},{int(line.split()[1]) / 1024:.1f}\n")
                            f.flush()
            except OSError:
                return
            stop.wait(5)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30,
                    help="about how long the job runs under attack (default 30)")
    ap.add_argument("--ranks", type=int, default=1024, help="the job's ranks (default 1024)")
    ap.add_argument("--rate", type=float, default=4.5,
                    help="iterations a second expected under attack, to size the job "
                         "(default 4.5, what 1,024 ranks made on 2 busy cores)")
    ap.add_argument("--build", default="build", help="the build directory (default build)")
    ap.add_argument("--out", help="a new directory for the outputs (default: a temporary one)")
    args = ap.parse_args()
    if args.minutes <= 0 or args.ranks <= 0 or args.ranks % 32 or args.rate <= 0:
        sys.exit("coord_soak: --minutes and --rate must be above 0 and --ranks a multiple of 32")
    bench = os.path.join(args.build, "bench_coord_load")
    serve = os.path.abspath(os.path.join(args.build, "joulepipe"))
    for path in (bench, serve):
        if not os.access(path, os.X_OK):
            sys.exit(f"coord_soak: {path} is missing; build first (cmake --build {args.build})")
    if args.out:
        if os.path.exists(args.out) and os.listdir(args.out):
            sys.exit(f"coord_soak: {args.out} exists and is not empty; name a new directory")
        os.makedirs(args.out, exist_ok=True)
        out = args.out
    else:
        out = tempfile.mkdtemp(prefix="coord-soak-")
    seconds = args.minutes * 60
    iterations = max(100, int(seconds * args.rate))

    # The server as the bench starts it, its log also in serve.out (the port).
    wrapper = os.path.join(out, "serve_wrapper.sh")
    with open(wrapper, "w") as f:
        f.write(f'#!/bin/bash\nexec > >(tee {out}/serve.out)\nexec {serve} "$@"\n')
    os.chmod(wrapper, 0o700)

    def log(text):
        print(f"coord_soak: {text}", flush=True)

    log(f"{args.ranks} ranks, {iterations} iterations (about {args.minutes:g} min), "
        f"outputs in {out}")
    with open(os.path.join(out, "bench.out"), "w") as bench_out:
        proc = subprocess.Popen(
            [bench, "--server", wrapper, "--ranks", str(args.ranks), "--iterations",
             str(iterations), "--spread-ms", "200", "--watchdog-s", str(int(seconds * 3 + 600))],
            stdout=bench_out, stderr=subprocess.STDOUT, start_new_session=True)
    port = pid = None
    deadline = time.time() + 60
    while time.time() < deadline and port is None and proc.poll() is None:
        try:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)",
                          open(os.path.join(out, "serve.out")).read())
            port = int(m.group(1)) if m else None
        except OSError:
            pass
        time.sleep(0.2)
    if port is not None:
        found = subprocess.run(["pgrep", "-n", "-f", f"{serve} serve"], capture_output=True,
                               text=True, timeout=10)
        pid = int(found.stdout.split()[0]) if found.stdout.split() else None
    if port is None or pid is None:
        os.killpg(proc.pid, signal.SIGTERM)
        sys.exit(f"coord_soak: the server did not start; see {out}/bench.out and serve.out")
    log(f"server pid {pid} on port {port}; attacking from 127.0.0.2")

    stop = threading.Event()
    sampler = threading.Thread(target=rss_sampler,
                               args=(pid, os.path.join(out, "rss.csv"), stop), daemon=True)
    sampler.start()
    attacker = Attacker(port, stop)
    rounds = []
    attack = threading.Thread(target=lambda: rounds.append(attacker.loop(log)), daemon=True)
    attack.start()
    try:
        rc = proc.wait(timeout=seconds * 3 + 900)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        rc = "killed (ran over three times the expected time)"
    stop.set()
    attack.join(timeout=120)
    with open(os.path.join(out, "attack.json"), "w") as f:
        json.dump({"rounds": rounds[0] if rounds else None, "counts": attacker.counts}, f,
                  indent=1, sort_keys=True)

    report = open(os.path.join(out, "bench.out")).read()
    rss = [float(line.split(",")[1]) for line in
           open(os.path.join(out, "rss.csv")).read().splitlines()[1:]]
    print()
    print(f"attack rounds: {rounds[0] if rounds else 'unfinished'}; outcomes (attack.json):")
    for key, n in sorted(attacker.counts.items()):
        print(f"  {n:9d}  {key}")
    if rss:
        ordered = sorted(rss)
        print(f"server RSS (MiB, every 5 s, {len(rss)} samples): start {rss[0]:.0f}, "
              f"median {ordered[len(rss) // 2]:.0f}, max {ordered[-1]:.0f}, end {rss[-1]:.0f}")
        per = max(1, len(rss) // 6)
        print("  max per sixth of the run: " +
              ", ".join(f"{max(rss[i:i + per]):.0f}" for i in range(0, len(rss), per)))
    print()
    keep = re.compile(r"^(iterations:|plans:|plan versions|  v\d|ranks running|server:|"
                      r"  \[(PASS|FAIL)\]|PASS|FAIL|[A-Z]+ /|route)")
    print("the job (bench_coord_load, bench.out):")
    for line in report.splitlines():
        if keep.match(line):
            print("  " + line)
    print(f"bench exit status: {rc}")
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
