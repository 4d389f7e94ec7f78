#!/usr/bin/env bash
# Regenerates every file in docs/examples/ from the embedded default job
# (GPT-3 175B on A100-SXM, the Perseus SOSP'24 measured stage profile that
# `joulepipe demo` embeds, 1F1B 8 stages x 96 microbatches, P_block 83.64 W).
# Usage, from the repository root after building: bash docs/examples/make.sh
# Needs chromium for the screenshot (scripts/install-deps installs it).
set -euo pipefail
cd "$(dirname "$0")/../.."
jp=${JOULEPIPE:-build/joulepipe}
out=docs/examples
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
profile=data/profiles/gpt3-175b+a100_sxm_bf16.csv
job=(--profile "$profile" --schedule 1f1b --stages 8 --microbatches 96 --p-block 83.64
  --resolution-ms 5 --max-plans 0)

# Operating points: the same frontier, four goals.
{
  echo "# Operating points of one GPT-3 175B pipeline on A100-SXM (1f1b, 8 x 96)."
  echo "# Made by docs/examples/make.sh; each block is one command's 'chosen plan' lines."
  for goal in "" "--least-energy" "--least-energy --host-power 150" "--max-slowdown 1.05" \
    "--power-budget 2600"; do
    echo
    echo "\$ joulepipe plan --profile $profile --schedule 1f1b --stages 8 --microbatches 96 \\"
    echo "    --p-block 83.64 --resolution-ms 5 --max-plans 0 --out plan-out $goal"
    # shellcheck disable=SC2086
    "$jp" plan "${job[@]}" --out "$work/plan" $goal 2>/dev/null | sed -n '/^chosen plan/,/^frontier/p' |
      grep -v '^frontier'
  done
} >"$out/operating-points.txt"

# The report: the same-time plan, the 16-pipeline job with a straggler and its
# all-reduce (0.85 s, as `site` puts it), its waveform and a 0.5 MW/s grid plan,
# host 150 W.
"$jp" plan "${job[@]}" --out "$work/plan" >/dev/null 2>&1
"$jp" simulate --profile "$profile" --p-block 83.64 --pipelines 16 --stages 8 \
  --microbatches 96 --tp 8 --straggler-slowdown 1.2 --iterations 2 --allreduce-ms 850 --grid \
  --max-ramp-mw-per-s 0.5 --grid-frontier --json >"$work/run.json" 2>/dev/null
"$jp" report --frontier "$work/plan" --profile "$profile" --sim "$work/run.json" \
  --host-power 150 --force --out "$out/report.html" >/dev/null
# The report names where its inputs were read; make that the commands' names.
sed -i "s|$work/run.json|run.json|g; s|$work/plan|plan-out|g" "$out/report.html"
python3 tests/report/browser_check.py "$out/report.html" --screenshot "$out/report.png"

# The site: 4,096 A100-SXM, 300B tokens, host 150 W per GPU, a 5 MW facility.
site=(--model gpt3-175b --gpu a100-sxm --gpus 4096 --tokens 300e9 --host-power 150
  --power-budget-mw 5 --straggler-slowdown 1.2)
{
  echo "\$ joulepipe site ${site[*]}"
  "$jp" site "${site[@]}" 2>/dev/null
} >"$out/site.txt"
"$jp" site "${site[@]}" --json >"$out/site.json" 2>/dev/null
# Configuration x clocks: the demo job's tune (about 80 s here).
tune=(--model gpt3-175b --gpu a100-sxm --gpus 1024)
{
  echo "\$ joulepipe tune ${tune[*]} --out tune-out"
  "$jp" tune "${tune[@]}" --out "$work/tune" 2>/dev/null | sed "s|$work/tune|tune-out|"
} >"$out/tune.txt"
cp "$work/tune/envelope.svg" "$out/tune-envelope.svg"
echo "wrote $out: operating-points.txt report.html report.png site.txt site.json tune.txt" \
  "tune-envelope.svg"
