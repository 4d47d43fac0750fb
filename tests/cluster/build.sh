#!/usr/bin/env bash
# Builds the control-plane binaries that the cluster tests run, from source,
# into target/cluster/bin/. Every module comes through the Go module proxy at
# the version pinned in tests/cluster/go/<component>/go.mod (and go.sum), and
# every Go cache lives under target/cluster/, so nothing outside the
# repository's target/ is written.
#
# Idempotent: a binary is rebuilt only when its stamp (a hash of its module's
# go.mod, go.sum and main.go, the package, the link flags and the Go version)
# differs from the one recorded when it was built.
#
# Usage: tests/cluster/build.sh [component...]
#   components: etcd kube-apiserver kube-controller-manager kube-scheduler
#               kwok jobset training-operator kueue trainer   (default: all)
# Each build's wall time is appended to target/cluster/build-times.log.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cluster=${TRAINC_CLUSTER_DIR:-$root/target/cluster}
bin=$cluster/bin
stamps=$cluster/stamps

export GOPATH=$cluster/gopath
export GOMODCACHE=$cluster/gomodcache
export GOCACHE=$cluster/gocache
# The committed go.mod and go.sum are the pins: a build must not rewrite them.
export GOFLAGS="-mod=readonly -buildvcs=false -trimpath"
# Every pinned module builds with the Go on this machine (1.26); a module
# that asked for a newer Go would fail here rather than fetch a toolchain.
export GOTOOLCHAIN=local
# Static binaries, as upstream releases them.
export CGO_ENABLED=0

mkdir -p "$bin" "$stamps"

# version_of MODULE_DIR MODULE: the version of MODULE that MODULE_DIR pins.
version_of() {
	(cd "$here/go/$1" && go list -m -f '{{.Version}}' "$2")
}

# The link flags that stamp Kubernetes' own version into its binaries; without
# them /version reports v0.0.0 and clients that check the server version
# (kubectl's skew warning, controllers' feature gates) see a wrong one.
kubernetes_ldflags() {
	local version major minor flags="-s -w" pkg
	version=$(version_of kubernetes k8s.io/kubernetes)
	major=${version#v}
	minor=${major#*.}
	minor=${minor%%.*}
	major=${major%%.*}
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major"
		flags+=" -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
		flags+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
	done
	printf '%s' "$flags"
}

# stamp_of MODULE_DIR PACKAGE LDFLAGS: what a built binary must match.
stamp_of() {
	local dir=$here/go/$1
	{
		go env GOVERSION
		printf '%s\n%s\n' "$2" "$3"
		cat "$dir/go.mod" "$dir/go.sum"
		if [[ -f $dir/main.go ]]; then cat "$dir/main.go"; fi
	} | sha256sum | cut -d' ' -f1
}

# download MODULE_DIR PACKAGE BINARY: fetches the modules that PACKAGE's build needs
# (`go list -deps` loads every package it imports), tried three times. The Go
# command does not retry a fetch that the module proxy answers late or with
# a server error, and one such answer among a cold build's few hundred
# downloads failed a whole CI run.
download() {
	local try
	for try in 1 2 3; do
		if (cd "$here/go/$1" && go list -deps -f '{{.ImportPath}}' "$2" >/dev/null); then
			return 0
		fi
		if ((try < 3)); then
			echo "build.sh: fetching the modules of $3 failed (try $try of 3); trying again in $((try * 15))s" >&2
			sleep $((try * 15))
		fi
	done
	echo "build.sh: could not fetch the modules of $3 through the Go module proxy in 3 tries" >&2
	return 1
}

# build MODULE_DIR PACKAGE BINARY [LDFLAGS]
build() {
	local module=$1 pkg=$2 out=$3 ldflags=${4:--s -w} stamp start elapsed
	stamp=$(stamp_of "$module" "$pkg" "$ldflags")
	if [[ -x $bin/$out && -f $stamps/$out && $(<"$stamps/$out") == "$stamp" ]]; then
		echo "build.sh: $out is up to date"
		return 0
	fi
	echo "build.sh: building $out from $pkg"
	start=$(date +%s)
	download "$module" "$pkg" "$out"
	(cd "$here/go/$module" && nice -n 10 go build -ldflags "$ldflags" -o "$bin/$out.tmp" "$pkg")
	mv -f "$bin/$out.tmp" "$bin/$out"
	printf '%s\n' "$stamp" >"$stamps/$out"
	elapsed=$(($(date +%s) - start))
	printf '%s %s %ss\n' "$(date -u +%FT%TZ)" "$out" "$elapsed" >>"$cluster/build-times.log"
	echo "build.sh: built $out in ${elapsed}s"
}

build_component() {
	case $1 in
	etcd) build etcd . etcd ;;
	kube-apiserver | kube-controller-manager | kube-scheduler)
		build kubernetes "k8s.io/kubernetes/cmd/$1" "$1" "$(kubernetes_ldflags)" ;;
	kwok) build kwok sigs.k8s.io/kwok/cmd/kwok kwok ;;
	jobset) build jobset sigs.k8s.io/jobset jobset-controller ;;
	training-operator)
		build training-operator github.com/kubeflow/training-operator/cmd/training-operator.v1 training-operator ;;
	kueue) build kueue sigs.k8s.io/kueue/cmd/kueue kueue ;;
	trainer)
		build trainer github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager trainer-controller-manager ;;
	*)
		echo "build.sh: unknown component $1" >&2
		return 2
		;;
	esac
}

if [[ $# -eq 0 ]]; then
	set -- etcd kube-apiserver kube-controller-manager kube-scheduler kwok jobset training-operator kueue trainer
fi
for component in "$@"; do
	build_component "$component"
done
