#!/usr/bin/env bash
# Installs everything tensorwire needs to build, test and benchmark on Debian 12.
# Idempotent: packages already present are left alone. Run as root (or with sudo).
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev ccache
  # libraries (header-only ones included): one Asio, from Boost 1.81
  libboost1.81-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev
  nlohmann-json3-dev libpcap-dev libconcurrentqueue-dev zlib1g-dev
  # TLS on the control plane (optional at run time); openssl makes the tests' certificates
  libssl-dev openssl
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev python3 iproute2 iperf3
  # the ssh launcher's test runs a real sshd; the HTTP API is tested with curl;
  # pgrep/pkill find a run's processes
  openssh-client openssh-server curl procps
  # static checks of the Docker and Kubernetes files
  python3-yaml
  # promtool checks the controller's /metrics (its server is left stopped, below)
  prometheus
  # the timelines' protobuf files are decoded against Perfetto's definitions
  protobuf-compiler python3-protobuf
  # the report and the dashboard are tested in a real browser (driven by
  # playwright-core from npm, with this Chromium)
  chromium
  # the real training jobs the capture is tested on (examples/)
  python3-torch python3-torchvision
  # a second transport for the capture tests (examples/ps/train_zmq.py); setpriv
  # runs the no-permission capture test as nobody
  python3-zmq util-linux
  # the MPI job (examples/mpi/train_mpi.py): mpi4py over OpenMPI's TCP transport
  python3-mpi4py openmpi-bin
)

# npm brings uPlot into the report at build time, and playwright-core for the
# browser tests: Debian's nodejs and npm, unless a Node.js with its npm is there
# already (another distribution's nodejs package bundles npm, and conflicts with
# Debian's).
command -v npm > /dev/null 2>&1 || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
# Only promtool is wanted from prometheus: when this installs it, its server must
# not start (nothing of ours listens on more than it needs), now or at boot.
# policy-rc.d is Debian's way to keep a package's service from starting.
new_prometheus=0 policy_made=0
for p in "${missing[@]}"; do [ "$p" = prometheus ] && new_prometheus=1; done
if [ $new_prometheus -eq 1 ] && [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d > /dev/null
  $SUDO chmod 755 /usr/sbin/policy-rc.d
  policy_made=1
fi
status=0
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" || status=$?
[ $policy_made -eq 1 ] && $SUDO rm -f /usr/sbin/policy-rc.d
if [ $new_prometheus -eq 1 ] && [ -d /run/systemd/system ]; then
  $SUDO systemctl disable --now prometheus > /dev/null 2>&1 || true
fi
exit $status
