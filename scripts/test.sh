#!/usr/bin/env bash
# Runs every test of asynqdeck on this machine, installing what a fresh
# machine lacks: redis-server (Debian package) for the private test servers,
# Debian's chromium and chromium-driver for the browser tests
# (tests/browser/), and the Go modules of the interop peer (through the Go
# module proxy).
# Usage: bash scripts/test.sh   (the README's test command; .ci/run calls it)
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
[ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] || need_apt+=(chromium chromium-driver)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "==> installing ${need_apt[*]} from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt_get=(apt-get); [ "$(id -u)" -eq 0 ] || apt_get=(sudo apt-get)
  "${apt_get[@]}" update -qq
  "${apt_get[@]}" install -y -qq "${need_apt[@]}" >/dev/null
fi
for tool in cargo go redis-server /usr/bin/chromium /usr/bin/chromedriver; do
  command -v "$tool" >/dev/null 2>&1 || { echo "error: $tool not found" >&2; exit 1; }
done

echo "==> Go interop peer (github.com/hibiken/asynq v0.26.0)"
(cd interop && go mod download && go vet ./... && go build -o ../target/asynq-peer ./cmd/asynq-peer)

echo "==> cargo fmt --check"
cargo fmt --check
echo "==> cargo clippy --all-targets -- -D warnings"
cargo clippy --quiet --all-targets -- -D warnings
echo "==> cargo test (unit, integration, browser)"
cargo test --lib --bins --examples --test integration --test browser
echo "==> chaos suite (tests/chaos; RELIABILITY.md)"
cargo test --test chaos
cargo test --doc
echo "==> every test passed (unit, integration, interop, browser, chaos, doc)"
