#!/usr/bin/env bash
# Runs every test: formatting, lints, unit, CLI, golden and external-tool
# tests. Installs what it needs (kubernetes-validate and pre-commit from PyPI)
# into target/, so it works on a fresh clone and, once installed, offline.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/tools/venv
kv_version=1.37.0
pc_version=4.7.0
if ! "$venv/bin/kubernetes-validate" --version 2>/dev/null | grep -q "$kv_version" ||
   ! "$venv/bin/pre-commit" --version 2>/dev/null | grep -q "$pc_version"; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "kubernetes-validate==$kv_version" "pre-commit==$pc_version"
fi
export TRAINC_KUBERNETES_VALIDATE="$PWD/$venv/bin/kubernetes-validate"
export TRAINC_PRE_COMMIT="$PWD/$venv/bin/pre-commit"
export TRAINC_REQUIRE_TOOLS=1

cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
cargo test --all-targets --locked
