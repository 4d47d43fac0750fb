# Sourced by tests/run.sh and tests/cluster/test.sh from the repository's
# top, after tests/kubectl.sh: builds what tests/cluster.rs runs (cached
# under target/cluster/; a cold build takes about ten minutes on two cores,
# see docs/development.md), starts the control plane once for the whole run,
# stops it when the calling script exits, and exports
# TRAINC_CLUSTER_KUBECONFIG. Needs root: each controller runs in mount and
# network namespaces of its own (tests/cluster/README.md).
cluster_components=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok jobset training-operator kueue trainer)
cluster_controllers=(jobset training-operator kueue trainer)
bash tests/cluster/build.sh "${cluster_components[@]}"
# One a killed run left behind.
bash tests/cluster/cluster.sh down >/dev/null 2>&1 || true
trap 'bash tests/cluster/cluster.sh down >/dev/null 2>&1 || true' EXIT
bash tests/cluster/cluster.sh up "${cluster_controllers[@]}"
export TRAINC_CLUSTER_KUBECONFIG="$PWD/target/cluster/run/kubeconfig"
