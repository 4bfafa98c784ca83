#!/usr/bin/env bash
# From a fresh Debian 12 machine to the main job: installs the packages, builds
# tensorwire, and runs it on a bundled default (ResNet-50, ring all-reduce, 4 ranks):
# synthesise the profile, validate it, and summarise it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DTW_TESTS=OFF -DTW_BENCH=OFF > /dev/null
ninja -C build-release > build-release.log 2>&1 || { tail -40 build-release.log; exit 1; }
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
echo "Binary: $tw   Profile: $out/resnet50-ring-4.yaml"
