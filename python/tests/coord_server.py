"""Runs `joulepipe serve` for a test and talks to it over HTTP (stdlib only).

The build directory is $JOULEPIPE_BUILD_DIR (default: build/ in the repo).
"""

import json
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

from build_paths import CLI


class Server:
    """`joulepipe serve --port 0 ...` as a child process; stop() ends it."""

    def __init__(self, *args, env=None):
        self.proc = subprocess.Popen(
            [str(CLI), "serve", "--host", "127.0.0.1", "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        deadline = time.time() + 30
        self.lines = []
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            m = re.search(r"listening on (http://[0-9.]+:[0-9]+)", line)
            if m:
                self.url = m.group(1)
                return
        self.proc.kill()
        raise RuntimeError("joulepipe serve did not start:\n" + "".join(self.lines))

    def request(self, method, path, body=None, content_type="application/json", timeout=60):
        data = None
        if body is not None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                text = r.read().decode()
                return r.status, (json.loads(text) if text else None)
        except urllib.error.HTTPError as e:
            text = e.read().decode()
            return e.code, (json.loads(text) if text else None)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
