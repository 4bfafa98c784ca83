#!/usr/bin/env bash
# From a fresh Debian 12 machine to the main job: installs the packages, builds
# tensorwire, and runs it on a bundled default: the profile of ResNet-50 trained
# with PyTorch DDP over a Gloo ring of 4 ranks is synthesised, checked, and replayed
# as real TCP traffic by 4 agents that a controller launches on this machine, and
# the replay is compared with the profile's plan.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DTW_TESTS=OFF -DTW_BENCH=OFF > /dev/null
ninja -C build-release > build-release/build.log 2>&1 || { tail -40 build-release/build.log; exit 1; }
tw=build-release/cli/tensorwire
out=${TW_OUT:-runs/quickstart}
mkdir -p "$out"
echo "== tensorwire profile synth (ResNet-50, PyTorch DDP over a Gloo ring, 4 ranks)"
"$tw" profile synth --model resnet50 --pattern ring-allreduce --ranks 4 -o "$out/resnet50-ring-4.yaml"
echo "== tensorwire profile validate"
"$tw" profile validate "$out/resnet50-ring-4.yaml"
echo "== tensorwire profile show"
"$tw" profile show "$out/resnet50-ring-4.yaml" --link-gbps 10
echo
echo "== tensorwire run --local 4 (a controller and 4 agents, real TCP on loopback, 5 iterations)"
rm -rf "$out/run"
"$tw" run "$out/resnet50-ring-4.yaml" --local 4 --out "$out/run" --iterations 5
echo
echo "== tensorwire results check"
"$tw" results check "$out/run"
echo
echo "Binary: $tw   Profile: $out/resnet50-ring-4.yaml   Run: $out/run (compare.json, run.json, rank-R.twr)"
