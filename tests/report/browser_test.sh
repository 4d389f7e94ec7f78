#!/usr/bin/env bash
# The report in a real browser: plans the measured GPT-3 175B A100-SXM
# profile (8 x 12), simulates it with a straggler (and its power waveform and a
# grid plan: the "What the grid sees" section), writes the report and has
# headless Chromium render it (browser_check.py: SVG figures present, no
# console errors, no network requests, a PNG screenshot).
# Usage: browser_test.sh JOULEPIPE SOURCE_DIR WORK_DIR
set -euo pipefail
joulepipe=$1 src=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
profile="$src/data/profiles/gpt3-175b+a100_sxm_bf16.csv"
shape=(--stages 8 --microbatches 12 --p-block 83.64)
timeout 300 "$joulepipe" plan --profile "$profile" --schedule 1f1b "${shape[@]}" \
  --resolution-ms 2 --out "$work/plan" >/dev/null
timeout 300 "$joulepipe" simulate --profile "$profile" "${shape[@]}" --pipelines 4 --tp 8 \
  --straggler-slowdown 1.2 --iterations 2 --allreduce-ms 300 --grid --min-power-fraction 0.5 \
  --grid-frontier --json >"$work/run.json"
timeout 120 "$joulepipe" report --frontier "$work/plan" --sim "$work/run.json" \
  --host-power 150 --out "$work/report.html"
timeout 180 python3 "$src/tests/report/browser_check.py" "$work/report.html" \
  --screenshot "$work/report.png" --require-grid
