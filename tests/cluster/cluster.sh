#!/usr/bin/env bash
# Starts and stops a local Kubernetes control plane for the cluster tests:
# etcd, kube-apiserver, kube-controller-manager and kube-scheduler built by
# tests/cluster/build.sh, plus kwok for fake nodes when it is built. Every
# server listens on 127.0.0.1 only, on ports the kernel picked as free.
#
# Usage: tests/cluster/cluster.sh up [CONTROLLER...] | down | smoke
#   up     generate certificates, start the components, wait until ready and
#          write target/cluster/run/kubeconfig; each CONTROLLER named (jobset,
#          training-operator, kueue, trainer) is installed from its upstream
#          manifests and run as a local process; trainer needs jobset first
#   down   stop what `up` started (by the process ids it recorded)
#   smoke  check /readyz, apply a restricted Namespace and a Job, and wait for
#          the Job controller to create its Pod (and, with kwok, to complete it)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cluster=${TRAINC_CLUSTER_DIR:-$root/target/cluster}
bin=$cluster/bin
case $cluster in
/run/* | /var/run/*)
	echo "cluster.sh: TRAINC_CLUSTER_DIR may not be under /run (controllers get their own /run)" >&2
	exit 2
	;;
esac
run=$cluster/run
pki=$run/pki
logs=$run/logs
pids=$run/pids
kubeconfig=$run/kubeconfig
kubectl=${TRAINC_KUBECTL:-$root/target/tools/kubectl/kubectl}

# The cluster's own address ranges. No traffic goes there: nothing runs
# pods, and kube-proxy is absent. They only feed the API's IP allocators.
service_cidr=10.96.0.0/16
service_ip=10.96.0.1

die() {
	echo "cluster.sh: $*" >&2
	exit 1
}

# free_port: a TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# new_ca NAME: a self-signed certificate authority.
new_ca() {
	openssl req -x509 -newkey rsa:2048 -nodes -days 30 -sha256 \
		-keyout "$pki/$1.key" -out "$pki/$1.crt" -subj "/CN=trainc-test-$1" \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
}

# issue CA NAME SUBJECT EXTENSIONS: a key and a certificate signed by CA.
issue() {
	openssl req -new -newkey rsa:2048 -nodes -keyout "$pki/$2.key" \
		-subj "$3" -out "$pki/$2.csr" 2>/dev/null
	openssl x509 -req -in "$pki/$2.csr" -CA "$pki/$1.crt" -CAkey "$pki/$1.key" \
		-CAcreateserial -days 30 -sha256 -extfile <(printf '%s\n' "$4") \
		-out "$pki/$2.crt" 2>/dev/null
	rm -f "$pki/$2.csr"
}

make_pki() {
	mkdir -p "$pki"
	chmod 700 "$pki"
	new_ca ca
	local client="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
	issue ca apiserver "/CN=kube-apiserver" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:$service_ip,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	# The identities the bootstrap RBAC policy already knows.
	issue ca admin "/O=system:masters/CN=trainc-test-admin" "$client"
	issue ca controller-manager "/CN=system:kube-controller-manager" "$client"
	issue ca scheduler "/CN=system:kube-scheduler" "$client"
	# The aggregation layer's own CA and client, so that the apiserver
	# publishes a request-header CA and extension API servers (and the
	# controllers' delegated authentication) find one.
	new_ca front-proxy-ca
	issue front-proxy-ca front-proxy-client "/CN=front-proxy-client" "$client"
	openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
	openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
}

# write_kubeconfig FILE IDENTITY
write_kubeconfig() {
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: trainc-test
  cluster:
    server: https://127.0.0.1:$apiserver_port
    certificate-authority: $pki/ca.crt
users:
- name: $2
  user:
    client-certificate: $pki/$2.crt
    client-key: $pki/$2.key
contexts:
- name: trainc-test
  context:
    cluster: trainc-test
    user: $2
current-context: trainc-test
EOF
}

# start_time PID: when the process started (in clock ticks since boot); with
# the id it names one process, even after the id is reused.
start_time() {
	sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20
}

# track NAME PID: records a process that `down` stops, in start order.
track() {
	echo "$2 $(start_time "$2")" >"$pids/$1"
	echo "$1" >>"$run/started"
}

# start NAME ARGS...: runs a binary from $bin in its own session, logging to
# $logs/NAME.log.
start() {
	local name=$1
	shift
	[[ -x $bin/$name ]] || die "$bin/$name is missing: run tests/cluster/build.sh"
	setsid "$bin/$name" "$@" </dev/null >"$logs/$name.log" 2>&1 &
	track "$name" $!
}

# wait_for WHAT SECONDS COMMAND...: retries COMMAND until it succeeds.
wait_for() {
	local what=$1 deadline=$((SECONDS + $2))
	shift 2
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS >= deadline)); then
			die "$what did not become ready; see $logs/"
		fi
		sleep 0.5
	done
}

running() {
	local pid started
	read -r pid started <"$pids/$1" && [[ $(start_time "$pid") == "$started" ]]
}

k() {
	"$kubectl" --kubeconfig "$kubeconfig" "$@"
}

up() {
	if [[ -f $run/started ]]; then
		die "a cluster is already running from $run; run '$0 down' first"
	fi
	rm -rf "$run"
	mkdir -p "$logs" "$pids" "$run/etcd"
	# A failed start leaves nothing running.
	trap 'status=$?; if ((status != 0)); then down; fi; exit $status' EXIT
	make_pki

	local etcd_port etcd_peer_port
	etcd_port=$(free_port)
	etcd_peer_port=$(free_port)
	apiserver_port=$(free_port)
	start etcd --name=trainc-test --data-dir="$run/etcd" \
		--listen-client-urls="http://127.0.0.1:$etcd_port" \
		--advertise-client-urls="http://127.0.0.1:$etcd_port" \
		--listen-peer-urls="http://127.0.0.1:$etcd_peer_port" \
		--initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer_port" \
		--initial-cluster="trainc-test=http://127.0.0.1:$etcd_peer_port" \
		--unsafe-no-fsync --log-level=warn
	wait_for etcd 30 curl -fsS "http://127.0.0.1:$etcd_port/health"

	# The endpoint reconciler is off: it would publish 127.0.0.1 as the
	# kubernetes Service's endpoint, which validation refuses (loopback).
	# Aggregator routing stays off: the default service resolver follows an
	# ExternalName Service (localhost), which is how webhooks served by
	# controllers running on this machine are reached.
	start kube-apiserver \
		--etcd-servers="http://127.0.0.1:$etcd_port" \
		--bind-address=127.0.0.1 --advertise-address=127.0.0.1 \
		--secure-port="$apiserver_port" \
		--tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
		--client-ca-file="$pki/ca.crt" \
		--requestheader-client-ca-file="$pki/front-proxy-ca.crt" \
		--requestheader-allowed-names=front-proxy-client \
		--requestheader-username-headers=X-Remote-User \
		--requestheader-group-headers=X-Remote-Group \
		--requestheader-extra-headers-prefix=X-Remote-Extra- \
		--proxy-client-cert-file="$pki/front-proxy-client.crt" \
		--proxy-client-key-file="$pki/front-proxy-client.key" \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-account-key-file="$pki/sa.pub" \
		--service-account-signing-key-file="$pki/sa.key" \
		--service-cluster-ip-range="$service_cidr" \
		--endpoint-reconciler-type=none \
		--authorization-mode=Node,RBAC \
		--enable-admission-plugins=NodeRestriction,PodSecurity \
		--allow-privileged=true \
		--cert-dir="$run/apiserver-certs"

	write_kubeconfig "$kubeconfig" admin
	write_kubeconfig "$run/controller-manager.kubeconfig" controller-manager
	write_kubeconfig "$run/scheduler.kubeconfig" scheduler
	wait_for kube-apiserver 120 k get --raw /readyz

	start kube-controller-manager \
		--kubeconfig="$run/controller-manager.kubeconfig" \
		--authentication-kubeconfig="$run/controller-manager.kubeconfig" \
		--authorization-kubeconfig="$run/controller-manager.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port="$(free_port)" \
		--leader-elect=false \
		--use-service-account-credentials=true \
		--service-account-private-key-file="$pki/sa.key" \
		--root-ca-file="$pki/ca.crt" \
		--cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
		--service-cluster-ip-range="$service_cidr"
	start kube-scheduler \
		--kubeconfig="$run/scheduler.kubeconfig" \
		--authentication-kubeconfig="$run/scheduler.kubeconfig" \
		--authorization-kubeconfig="$run/scheduler.kubeconfig" \
		--bind-address=127.0.0.1 --secure-port="$(free_port)" \
		--leader-elect=false
	# The controller manager is ready once it has published the cluster CA
	# into the default namespace.
	wait_for kube-controller-manager 60 k -n default get configmap kube-root-ca.crt
	running kube-scheduler || die "kube-scheduler exited; see $logs/kube-scheduler.log"

	if [[ -x $bin/kwok ]]; then start_kwok; fi
	local controller
	for controller in "$@"; do
		case $controller in
		jobset) start_jobset ;;
		training-operator) start_training_operator ;;
		kueue) start_kueue ;;
		trainer) start_trainer ;;
		*) die "unknown controller $controller" ;;
		esac
	done
	trap - EXIT
	echo "cluster.sh: up; export KUBECONFIG=$kubeconfig"
}

start_kwok() {
	# kwok manages only the nodes labelled as its own, so a test can tell fake
	# nodes from anything else.
	start kwok \
		--kubeconfig="$kubeconfig" \
		--config="$here/kwok/kwok.yaml" \
		--manage-nodes-with-label-selector=type=kwok \
		--server-address="127.0.0.1:$(free_port)"
	k apply --server-side -f "$here/kwok/nodes.yaml" >/dev/null
	wait_for kwok 60 k wait --for=condition=Ready node --all --timeout=1s
}

# upstream_dir COMPONENT MODULE: the pinned upstream module's files, from the
# module cache that build.sh filled.
upstream_dir() {
	(cd "$here/go/$1" && GOMODCACHE=$cluster/gomodcache GOPATH=$cluster/gopath \
		GOCACHE=$cluster/gocache GOFLAGS=-mod=readonly GOTOOLCHAIN=local \
		go list -m -f '{{.Dir}}' "$2")
}

# install_upstream NAME KUSTOMIZATION WEBHOOK_PORT [API_PORT]: applies a
# controller's upstream install manifest, adapted to a controller running on
# this machine (see adapt-install.py).
install_upstream() {
	mkdir -p "$run/$1"
	k kustomize "$2" 2>/dev/null | k create --dry-run=client -o json -f - |
		python3 "$here/adapt-install.py" "${@:3}" >"$run/$1/install.json"
	k apply --server-side -f "$run/$1/install.json" >/dev/null
	# A controller that starts before the API server serves its kinds
	# fails to map them (Trainer exits: `no matches for kind "TrainJob"`).
	local crds
	crds=$(python3 -c 'import json, sys
print(" ".join("crd/" + o["metadata"]["name"] for o in json.load(open(sys.argv[1]))["items"]
               if o["kind"] == "CustomResourceDefinition"))' "$run/$1/install.json")
	# shellcheck disable=SC2086
	[[ -z $crds ]] || k wait --for=condition=Established --timeout=60s $crds >/dev/null
}

api_port() {
	sed -n 's|.*server: https://127.0.0.1:\([0-9]*\)$|\1|p' "$kubeconfig"
}

# start_pod NAME host|jail ARGS...: starts a controller the way its
# Deployment's Pod would run, as far as it can tell:
# - /run/secrets/kubernetes.io/serviceaccount holds its service account's
#   token, the cluster CA and its namespace (see pod_files), and
#   KUBERNETES_SERVICE_HOST/PORT lead to the API server: client-go's
#   in-cluster configuration works, with exactly the permissions that the
#   upstream RBAC grants;
# - /tmp/k8s-webhook-server/serving-certs (the path controller-runtime's
#   webhook server and certificate rotators use) is a mount of
#   $run/NAME/certs that no other controller shares.
# Both are mounts in a mount namespace of its own; /run there is a tmpfs.
# With "jail", it also runs in a network namespace of its own whose only
# interface is its loopback: for a controller that listens on all
# interfaces and has no option to listen on 127.0.0.1 only. forward.py
# carries its calls to the API server in, and `forward NAME PORT` carries
# calls to one of its ports out.
# The controller starts once its token is written and the API server's port
# answers.
start_pod() {
	local name=$1 mode=$2 api pid
	shift 2
	[[ -x $bin/$name ]] || die "$bin/$name is missing: run tests/cluster/build.sh"
	api=$(api_port)
	mkdir -p "$run/$name/certs" "$run/$name/serviceaccount" /tmp/k8s-webhook-server/serving-certs
	local namespaces=(--mount --propagation private)
	if [[ $mode == jail ]]; then namespaces+=(--net); fi
	KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$api \
		setsid unshare "${namespaces[@]}" bash -c '
			set -e
			if [[ $3 == jail ]]; then ip link set lo up; fi
			sa=/run/secrets/kubernetes.io/serviceaccount
			certs=/tmp/k8s-webhook-server/serving-certs
			mount --bind "$1/certs" "$certs"
			mount -t tmpfs tmpfs /run && mkdir -p "$sa" && mount --bind "$1/serviceaccount" "$sa"
			until [[ -s $sa/token ]] && (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; do sleep 0.2; done
			shift 3
			exec "$@"' \
		bash "$run/$name" "$api" "$mode" "$bin/$name" "$@" </dev/null >"$logs/$name.log" 2>&1 &
	pid=$!
	track "$name" "$pid"
	if [[ $mode == jail ]]; then
		wait_for "$name's network namespace" 10 \
			bash -c "[[ \$(readlink /proc/$pid/ns/net) != \$(readlink /proc/self/ns/net) ]]"
		echo "/proc/$pid/ns/net" >"$run/$name/netns"
		setsid python3 "$here/forward.py" "/proc/$pid/ns/net" "$api" - "$api" \
			</dev/null >"$logs/$name-api-forward.log" 2>&1 &
		track "$name-api-forward" $!
	fi
}

# pod_files NAME NAMESPACE SERVICE_ACCOUNT: what the kubelet writes into a
# Pod's service account volume.
pod_files() {
	local dir=$run/$1/serviceaccount
	cp "$pki/ca.crt" "$dir/ca.crt"
	printf '%s' "$2" >"$dir/namespace"
	k -n "$2" create token "$3" --duration=24h >"$dir/.token"
	mv "$dir/.token" "$dir/token"
}

# forward NAME PORT: a port on this machine's 127.0.0.1 that leads to PORT
# inside the network namespace of NAME (see start_pod); prints it.
forward() {
	local port
	port=$(free_port)
	setsid python3 "$here/forward.py" - "$port" "$(<"$run/$1/netns")" "$2" \
		</dev/null >"$logs/$1-$2-forward.log" 2>&1 &
	track "$1-$2-forward" $!
	echo "$port"
}

# in_jail NAME COMMAND...: runs COMMAND in NAME's network namespace.
in_jail() {
	local name=$1
	shift
	nsenter --net="$(<"$run/$name/netns")" "$@"
}

# mount_secret NAME NAMESPACE SECRET: does what the kubelet does for the
# Secret volume of the controller's Deployment: once the controller's
# certificate rotator has filled the Secret, its keys become files in the
# controller's certificate directory. (The rotator waits for those files.)
mount_secret() {
	local key certs=$run/$1/certs
	wait_for "the $2/$3 Secret" 120 \
		bash -c "'$kubectl' --kubeconfig '$kubeconfig' -n '$2' get secret '$3' -o jsonpath='{.data.tls\\.key}' | grep -q ."
	for key in ca.crt tls.crt tls.key; do
		k -n "$2" get secret "$3" -o jsonpath="{.data.${key//./\\.}}" | base64 -d >"$certs/.$key"
		mv -f "$certs/.$key" "$certs/$key"
	done
}

start_training_operator() {
	local dir webhook_port
	dir=$(upstream_dir training-operator github.com/kubeflow/training-operator)
	# Upstream's flags are its defaults; so it listens on all interfaces
	# (webhooks on 9443, probes on 8081, metrics on 8080): in a jail.
	# MY_POD_NAMESPACE is what its Deployment sets.
	MY_POD_NAMESPACE=kubeflow start_pod training-operator jail
	webhook_port=$(forward training-operator 9443)
	install_upstream training-operator "$dir/manifests/overlays/standalone" "$webhook_port"
	pod_files training-operator kubeflow training-operator
	mount_secret training-operator kubeflow training-operator-webhook-cert
	wait_for training-operator 120 in_jail training-operator curl -fsS http://127.0.0.1:8081/readyz
}

start_kueue() {
	local dir webhook_port probe_port visibility_port
	dir=$(upstream_dir kueue sigs.k8s.io/kueue)
	webhook_port=$(free_port)
	probe_port=$(free_port)
	visibility_port=$(free_port)
	install_upstream kueue "$dir/config/default" "$webhook_port" "$visibility_port"
	# Upstream's configuration, but listening on 127.0.0.1 only, without
	# leader election or metrics, and integrating only the job kinds trainc
	# writes.
	cat >"$run/kueue/config.yaml" <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
leaderElection: {leaderElect: false}
health: {healthProbeBindAddress: "127.0.0.1:$probe_port"}
metrics: {bindAddress: "0"}
webhook: {host: 127.0.0.1, port: $webhook_port}
visibilityServer: {bindAddress: 127.0.0.1, bindPort: $visibility_port}
clientConnection: {qps: 50, burst: 100}
integrations:
  frameworks:
  - batch/job
  - jobset.x-k8s.io/jobset
  - kubeflow.org/pytorchjob
  - kubeflow.org/tfjob
  - trainer.kubeflow.org/trainjob
EOF
	start_pod kueue host --config="$run/kueue/config.yaml"
	pod_files kueue kueue-system kueue-controller-manager
	mount_secret kueue kueue-system kueue-webhook-server-cert
	wait_for kueue 120 curl -fsS "http://127.0.0.1:$probe_port/readyz"
}

start_trainer() {
	local upstream manifests webhook_port probe_port kustomization=$run/trainer-controller-manager/kustomize
	upstream=$(upstream_dir trainer github.com/kubeflow/trainer/v2)/manifests
	webhook_port=$(free_port)
	probe_port=$(free_port)
	# Upstream's manager overlay, less the JobSet release it would download
	# (start_jobset installs JobSet) and less its Namespace file.
	mkdir -p "$kustomization"
	# kustomize takes relative paths only.
	manifests=$(realpath --relative-to="$kustomization" "$upstream")
	cat >"$kustomization/kustomization.yaml" <<EOF
namespace: kubeflow-system
resources:
- $manifests/base/crds
- $manifests/base/manager
- $manifests/base/rbac
- $manifests/base/webhook
secretGenerator:
- name: kubeflow-trainer-webhook-cert
  options: {disableNameSuffixHash: true}
EOF
	k create namespace kubeflow-system >/dev/null
	install_upstream trainer-controller-manager "$kustomization" "$webhook_port"
	cat >"$run/trainer-controller-manager/config.yaml" <<EOF
apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
leaderElection: {leaderElect: false}
health: {healthProbeBindAddress: "127.0.0.1:$probe_port", readinessEndpointName: readyz, livenessEndpointName: healthz}
metrics: {bindAddress: "0"}
webhook: {host: 127.0.0.1, port: $webhook_port}
EOF
	start_pod trainer-controller-manager host --config="$run/trainer-controller-manager/config.yaml"
	pod_files trainer-controller-manager kubeflow-system kubeflow-trainer-controller-manager
	mount_secret trainer-controller-manager kubeflow-system kubeflow-trainer-webhook-cert
	wait_for trainer-controller-manager 120 curl -fsS "http://127.0.0.1:$probe_port/readyz"
	# Upstream's runtimes, once its webhooks answer.
	k kustomize "$upstream/overlays/runtimes" 2>/dev/null | k apply --server-side -f - >/dev/null
}

start_jobset() {
	local dir webhook_port probe_port
	dir=$(upstream_dir jobset sigs.k8s.io/jobset)
	webhook_port=$(free_port)
	probe_port=$(free_port)
	install_upstream jobset-controller "$dir/config/default" "$webhook_port"
	# Upstream's defaults (internal certificate management included), but
	# listening on 127.0.0.1 only, without leader election or metrics.
	cat >"$run/jobset-controller/config.yaml" <<EOF
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection: {leaderElect: false}
webhook: {host: 127.0.0.1, port: $webhook_port}
health: {healthProbeBindAddress: "127.0.0.1:$probe_port"}
metrics: {bindAddress: "0"}
EOF
	start_pod jobset-controller host --config="$run/jobset-controller/config.yaml"
	pod_files jobset-controller jobset-system jobset-controller-manager
	mount_secret jobset-controller jobset-system jobset-webhook-server-cert
	wait_for jobset-controller 120 curl -fsS "http://127.0.0.1:$probe_port/readyz"
}

down() {
	[[ -f $run/started ]] || return 0
	local name pid
	# Reverse start order: controllers first, etcd last.
	for name in $(tac "$run/started"); do
		[[ -f $pids/$name ]] || continue
		# Only the process that was started: its id may have been reused.
		if running "$name"; then
			read -r pid _ <"$pids/$name"
			kill -TERM "$pid"
			for _ in $(seq 40); do
				running "$name" || break
				sleep 0.25
			done
			if running "$name"; then kill -KILL "$pid"; fi
		fi
		rm -f "$pids/$name"
	done
	rm -f "$run/started"
	echo "cluster.sh: down"
}

smoke() {
	local with_kwok=false
	if [[ -f $pids/kwok ]]; then with_kwok=true; fi
	k get --raw /readyz
	echo
	k version 2>&1 | grep -i server
	k apply --server-side -f "$here/smoke.yaml"
	# PodSecurity admission enforces the namespace's level.
	if k -n trainc-smoke run privileged --image=smoke.invalid/x --privileged \
		--restart=Never --dry-run=server >"$run/psa.out" 2>&1; then
		die "PodSecurity admitted a privileged pod into a restricted namespace"
	fi
	grep -o 'violates PodSecurity "restricted:latest"' "$run/psa.out"
	# The Job controller creates the Pod.
	wait_for "the smoke Job's Pod" 60 \
		bash -c "'$kubectl' --kubeconfig '$kubeconfig' -n trainc-smoke get pods -l job-name=smoke -o name | grep -q ."
	k -n trainc-smoke get pods -o wide
	if $with_kwok; then
		k -n trainc-smoke wait --for=condition=Complete job/smoke --timeout=60s
		k -n trainc-smoke wait --for=condition=Failed job/smoke-gpu-fail --timeout=60s
		k -n trainc-smoke get job,pods -o wide
		k -n trainc-smoke get pods -l job-name=smoke-gpu-fail \
			-o jsonpath='{.items[0].spec.nodeName} exit code {.items[0].status.containerStatuses[0].state.terminated.exitCode}{"\n"}'
	fi
	if [[ -f $pids/jobset-controller ]]; then
		k apply --server-side -f "$here/smoke-jobset.yaml"
		k -n trainc-smoke wait --for=condition=Completed jobset/smoke --timeout=120s
		k -n trainc-smoke get jobs -l jobset.sigs.k8s.io/jobset-name=smoke
	fi
	if [[ -f $pids/training-operator ]]; then
		k apply --server-side -f "$here/smoke-training-operator.yaml"
		k -n trainc-smoke wait --for=condition=Succeeded tfjob/smoke pytorchjob/smoke --timeout=120s
		# Its validating webhook answers.
		if k apply --dry-run=server -f - >"$run/webhook.out" 2>&1 <<EOF; then
{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
 "metadata": {"name": "invalid", "namespace": "trainc-smoke"},
 "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 2,
   "template": {"spec": {"containers": [{"name": "main", "image": "smoke.invalid/x"}]}}}}}}
EOF
			die "the training-operator's webhook admitted an invalid PyTorchJob"
		fi
		grep -o 'admission webhook "[^"]*" denied the request' "$run/webhook.out"
	fi
	if [[ -f $pids/kueue ]]; then
		k apply --server-side -f "$here/smoke-kueue.yaml"
		# Quota for one: the first Job runs, the second waits its turn.
		k -n trainc-smoke wait --for=jsonpath='{.spec.suspend}'=false job/queued-1 --timeout=60s
		k -n trainc-smoke get workloads
		k get --raw /apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/smoke/pendingworkloads |
			grep -o '"name":"job-queued-2-[^"]*"'
		k -n trainc-smoke wait --for=condition=Complete job/queued-1 job/queued-2 --timeout=60s
	fi
	if [[ -f $pids/trainer-controller-manager ]]; then
		k apply --server-side -f "$here/smoke-trainer.yaml"
		k -n trainc-smoke-trainer wait --for=condition=Complete trainjob/smoke --timeout=120s
		k -n trainc-smoke-trainer get trainjob,jobset,jobs
	fi
}

case ${1:-} in
up)
	shift
	up "$@"
	;;
down) down ;;
smoke) smoke ;;
*)
	echo "usage: $0 up|down|smoke" >&2
	exit 2
	;;
esac
