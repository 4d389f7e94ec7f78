#!/usr/bin/env python3
"""Renders a joulepipe HTML report in headless Chromium and checks it.

Drives Chromium over the DevTools protocol on a pipe (--remote-debugging-pipe:
commands on fd 3, answers on fd 4, NUL-separated JSON), so it needs nothing but
the chromium binary and the standard library. Checks, failing with exit 1:
  * the page loads, and no request leaves it (only its own file:// URL);
  * no console message of level error or warning, and no script exception
    (the report has no scripts; an error would be the browser's own, e.g. a
    refused resource);
  * the SVG figures are there: at least --min-svgs <svg> elements, and the
    frontier's points, the timeline's instruction bars and the energy bars;
  * it saves a PNG screenshot of the whole page to --screenshot.
Usage: browser_check.py REPORT.html --screenshot OUT.png [--chromium PATH]
"""
import argparse
import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time


class DevTools:
    def __init__(self, chromium, timeout_s):
        self.timeout_s = timeout_s
        self.profile = tempfile.mkdtemp(prefix="joulepipe-chromium-")
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def wire():  # in the child: the protocol's two descriptors
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.proc = subprocess.Popen(
            [chromium, "--headless=new", "--remote-debugging-pipe", "--no-sandbox",
             "--disable-gpu", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--metrics-recording-only",
             f"--user-data-dir={self.profile}", "about:blank"],
            pass_fds=(3, 4), preexec_fn=wire, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []

    def call(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            while b"\0" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self.next_id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply.get("result", {})
                self.events.append(reply)
            ready, _, _ = select.select([self.from_browser], [], [], 0.2)
            if ready:
                chunk = os.read(self.from_browser, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe: " +
                                       self.proc.stderr.read().decode(errors="replace")[-2000:])
                self.buffer += chunk
        raise TimeoutError(f"{method}: no answer within {self.timeout_s} s")

    def wait_for(self, method, session, timeout_s):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(e.get("method") == method and e.get("sessionId") == session
                   for e in self.events):
                return
            self.call("Runtime.evaluate", {"expression": "1"}, session)  # pumps events
            time.sleep(0.1)
        raise TimeoutError(f"no {method} within {timeout_s} s")

    def close(self):
        try:
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def count(tools, session, selector):
    result = tools.call("Runtime.evaluate", {
        "expression": f"document.querySelectorAll({json.dumps(selector)}).length",
        "returnByValue": True}, session)
    return result["result"]["value"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report")
    parser.add_argument("--screenshot", required=True)
    parser.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    parser.add_argument("--min-svgs", type=int, default=4)
    parser.add_argument("--require-grid", action="store_true",
                        help="the report must have its \"What the grid sees\" charts "
                        "(a simulation with a waveform)")
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args()
    if not shutil.which(args.chromium):
        print(f"browser_check: no Chromium at '{args.chromium}'; install Debian's chromium "
              "(scripts/install-deps does)", file=sys.stderr)
        return 1
    url = "file://" + os.path.abspath(args.report)
    tools = DevTools(args.chromium, args.timeout)
    failures = []
    try:
        target = tools.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = tools.call("Target.attachToTarget",
                             {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Network", "Runtime", "Log", "Page"):
            tools.call(domain + ".enable", None, session)
        tools.call("Emulation.setDeviceMetricsOverride",
                   {"width": 1200, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                   session)
        tools.call("Page.navigate", {"url": url}, session)
        tools.wait_for("Page.loadEventFired", session, args.timeout)
        figures = {
            "svg": count(tools, session, "svg"),
            "frontier points": count(tools, session, "#frontier svg circle"),
            "timeline instructions": count(tools, session, "#timeline svg rect.instruction"),
            "energy bars": count(tools, session, "#energy svg rect.bar"),
            "tables": count(tools, session, "table"),
            "scripts": count(tools, session, "script"),
        }
        height = tools.call("Runtime.evaluate", {
            "expression": "document.documentElement.scrollHeight", "returnByValue": True},
            session)["result"]["value"]
        tools.call("Emulation.setDeviceMetricsOverride",
                   {"width": 1200, "height": int(height), "deviceScaleFactor": 1,
                    "mobile": False}, session)
        shot = tools.call("Page.captureScreenshot", {"format": "png"}, session)
        with open(args.screenshot, "wb") as out:
            out.write(base64.b64decode(shot["data"]))

        # Every legend label inside its chart's frame, as the browser draws
        # it (a fixed-width legend once ran past the frontier's frame).
        outside = tools.call("Runtime.evaluate", {
            "expression": """[...document.querySelectorAll('svg')].flatMap(svg => {
                const frame = svg.querySelector('rect.frame');
                if (!frame) return [];
                const f = frame.getBoundingClientRect();
                return [...svg.querySelectorAll('text.legend')]
                    .filter(t => { const b = t.getBoundingClientRect();
                                   return b.right > f.right + 0.5 || b.left < f.left - 0.5; })
                    .map(t => t.textContent);
            })""", "returnByValue": True}, session)["result"]["value"]
        for label in outside:
            failures.append(f"legend label '{label}' runs past its chart's frame")
        # Operating-point markers: no label over another, and no ring hidden
        # exactly under another (the straggler's S once sat under C).
        clashes = tools.call("Runtime.evaluate", {
            "expression": """[...document.querySelectorAll('svg')].flatMap(svg => {
                const boxes = [...svg.querySelectorAll('text.marker-label')]
                    .map(t => [t.textContent, t.getBoundingClientRect()]);
                const rings = [...svg.querySelectorAll('circle.marker')]
                    .map(c => [c.getAttribute('cx'), c.getAttribute('cy'), c.getAttribute('r')]
                              .join(' '));
                const out = [];
                for (let i = 0; i < boxes.length; ++i)
                    for (let j = i + 1; j < boxes.length; ++j) {
                        const [a, p] = boxes[i], [b, q] = boxes[j];
                        if (p.left < q.right - 0.5 && q.left < p.right - 0.5 &&
                            p.top < q.bottom - 0.5 && q.top < p.bottom - 0.5)
                            out.push(`labels ${a} and ${b} overlap`);
                    }
                rings.forEach((r, i) => { if (rings.indexOf(r) !== i)
                    out.push(`a marker ring hides under another at ${r}`); });
                return out;
            })""", "returnByValue": True}, session)["result"]["value"]
        failures.extend(clashes)
        # Every timeline label inside its bar.
        spilled = tools.call("Runtime.evaluate", {
            "expression": """[...document.querySelectorAll('svg')].flatMap(svg => {
                const bars = [...svg.querySelectorAll('rect.instruction')]
                    .map(r => r.getBoundingClientRect());
                return [...svg.querySelectorAll('text.bar-label')].filter(t => {
                    const b = t.getBoundingClientRect(), mid = (b.left + b.right) / 2,
                          y = (b.top + b.bottom) / 2;
                    const bar = bars.find(r => r.left <= mid && mid <= r.right &&
                                               r.top <= y && y <= r.bottom);
                    return !bar || b.left < bar.left - 0.5 || b.right > bar.right + 0.5;
                }).map(t => t.textContent);
            })""", "returnByValue": True}, session)["result"]["value"]
        for label in spilled[:5]:
            failures.append(f"timeline label '{label}' runs past its bar")
        figures["bar labels"] = count(tools, session, "text.bar-label")
        figures["grid charts"] = count(tools, session, "#grid svg")
        if args.require_grid and figures["grid charts"] < 3:
            failures.append(f"{figures['grid charts']} charts in \"What the grid sees\", "
                            "expected the power, the spectrum and the frontier")
        if figures["svg"] < args.min_svgs:
            failures.append(f"{figures['svg']} <svg> elements, expected >= {args.min_svgs}")
        for what in ("frontier points", "timeline instructions", "energy bars", "tables"):
            if figures[what] == 0:
                failures.append(f"no {what}")
        if figures["scripts"]:
            failures.append(f"{figures['scripts']} <script> elements in a report meant to have none")
        for e in tools.events:
            method, params = e.get("method"), e.get("params", {})
            if method == "Network.requestWillBeSent":
                request = params.get("request", {}).get("url", "")
                if request != url:
                    failures.append(f"network request to {request}")
            elif method == "Runtime.exceptionThrown":
                failures.append("exception: " + json.dumps(params.get("exceptionDetails"))[:300])
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error",
                                                                                  "warning"):
                failures.append("console: " + json.dumps(params.get("args"))[:300])
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in (
                    "error", "warning"):
                failures.append("log: " + params["entry"].get("text", "")[:300])
        print("browser_check: " + ", ".join(f"{k} {v}" for k, v in figures.items()) +
              f"; page {height} px high; screenshot {args.screenshot}")
    finally:
        tools.close()
    for failure in failures:
        print("browser_check: FAIL: " + failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
