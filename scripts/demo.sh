#!/usr/bin/env bash
# Builds asynqdeck and runs the demo: dashboard + embedded engine + workers +
# producer. Installs redis-server from Debian's packages when missing (the
# demo starts a private one unless a Redis answers on 127.0.0.1:6379).
# Usage: bash scripts/demo.sh [demo flags, e.g. --listen 127.0.0.1:9000]
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v redis-server >/dev/null 2>&1; then
  echo "==> installing redis-server from Debian's packages"
  apt_get=(apt-get); [ "$(id -u)" -eq 0 ] || apt_get=(sudo apt-get)
  export DEBIAN_FRONTEND=noninteractive
  "${apt_get[@]}" update -qq
  "${apt_get[@]}" install -y -qq redis-server >/dev/null
fi
echo "==> building (release)"
cargo build --release --quiet --bin asynqdeck
exec "${CARGO_TARGET_DIR:-target}/release/asynqdeck" demo "$@"
