#!/usr/bin/env bash
# The cluster tests alone (tests/cluster.rs): builds the components they
# run (tests/cluster/build.sh, cached under target/cluster/), starts the
# control plane, runs the tests against it and stops it, whatever happens.
# `bash tests/run.sh` runs them too, with everything else.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/kubectl.sh
source tests/kubectl.sh
# shellcheck source=tests/cluster/start.sh
source tests/cluster/start.sh
TRAINC_REQUIRE_TOOLS=1 cargo test --locked --test cluster "$@"
