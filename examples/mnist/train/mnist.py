"""TensorFlow 2 distributed training of a small digit classifier.

Two layouts, told apart by TF_CONFIG (exactly as a Kubernetes task receives
it): with ``ps`` tasks, parameter-server training; without, the collective
strategy (``MultiWorkerMirroredStrategy``, see ``run_collective``).

Parameter-server layout:

* ``chief``  - the coordinator. It builds a ``ParameterServerStrategy`` and a
  ``ClusterCoordinator``, creates the variables (they live on the ``ps``
  tasks), schedules training steps on the ``worker`` tasks, then evaluates on
  the test set, writes ``metrics.json``, a checkpoint and TensorBoard
  summaries, and finally the ``DONE`` marker.
* ``ps`` / ``worker`` - plain ``tf.distribute.Server``s that run whatever the
  chief sends them. They never return on their own in TF2, so they poll for
  ``DONE`` in the model directory (a shared volume) and exit when it appears.
* ``evaluator`` - unused; exits 0.
* no TF_CONFIG - trains in this one process, same outputs (for development).

Collective layout (``worker`` tasks, an optional ``chief``, no ``ps``): every
task holds a copy of the model; each step, every task computes gradients on
its shard of the batch and the gradients are averaged by all-reduce, so the
copies stay equal. The chief, else worker 0, writes the outputs; every task
returns when the last epoch is done.

DONE protocol: the chief writes ``<model_dir>/DONE`` atomically (write + rename)
as ``"ok <run_id>"`` or ``"failed <run_id>"``; ``run_id`` is new for every run.
A server remembers what DONE contained when it started (usually nothing, or
the marker of a previous run) and only acts on a marker that differs from it:
a stale marker can therefore never stop a new run, and no clock comparison
between machines is needed. ``ok`` exits 0, ``failed`` exits 1. (The one case
this cannot tell apart: a server that restarts after this run's chief has
already finished waits for the next run; the orchestrator must stop it.)

Data: scikit-learn's bundled 8x8 digits (no download), 20% held out.
Optimizer: Adam, written out with tf.Variables so that its slots live on the
parameter servers like the model (Keras 3 optimizers do not support
ParameterServerStrategy). Adam learns at both 0.01 and the example's 0.001.
"""

import argparse
import json
import os
import signal
import sys
import time
import traceback
import uuid

# Set before TensorFlow is imported (hence the late imports below); the caller
# can still override them.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Recommended for PS training: let the coordinator handle unreachable peers.
os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from tensorflow.core.framework import summary_pb2  # noqa: E402

SEED = 42
POLL_SECONDS = 0.5
# Marks a summary as a TensorBoard scalar. tf.summary.scalar would do this but
# needs the tensorboard package, which TensorFlow >= 2.21 no longer pulls in.
SCALAR = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
    data_class=summary_pb2.DATA_CLASS_SCALAR)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=0.01)
    parser.add_argument("--log_dir", default="/data/logs")
    parser.add_argument("--model_dir", default="/data/model")
    # The platform may pass more flags than this program knows: ignore them.
    args, unknown = parser.parse_known_args()
    if unknown:
        print(f"ignoring unknown arguments: {' '.join(unknown)}", flush=True)
    return args


def load_data() -> tuple:
    """Digits scaled to [0, 1]; a fixed, stratified 80/20 train/test split.

    Shuffled rather than "the last 20%": the file is ordered by writer, so its
    tail is a different population and would make the score a coin toss.
    """
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)  # pixel values are 0..16
    y = digits.target.astype(np.int32)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.2, random_state=SEED, stratify=y)
    return x_train, y_train, x_test, y_test


class MLP(tf.Module):
    """64 -> 64 (ReLU) -> 10. Initialised from NumPy so every run starts alike."""

    def __init__(self, sizes=(64, 64, 10), aggregation=None):
        super().__init__()
        aggregation = aggregation or tf.VariableAggregation.NONE
        rng = np.random.default_rng(SEED)
        self.weights, self.biases = [], []
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            limit = np.sqrt(6.0 / (n_in + n_out))  # Glorot uniform
            w = rng.uniform(-limit, limit, (n_in, n_out)).astype(np.float32)
            self.weights.append(tf.Variable(w, name=f"w{i}", aggregation=aggregation))
            self.biases.append(tf.Variable(
                tf.zeros([n_out]), name=f"b{i}", aggregation=aggregation))

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            x = tf.matmul(x, w) + b
            if i < len(self.weights) - 1:
                x = tf.nn.relu(x)
        return x


class Adam(tf.Module):
    """Adam (Kingma & Ba). Updates are applied asynchronously by each worker."""

    def __init__(self, params: list, lr: float, b1=0.9, b2=0.999, eps=1e-7,
                 aggregation=None):
        super().__init__()
        slot = dict(trainable=False,
                    aggregation=aggregation or tf.VariableAggregation.NONE)
        self.lr, self.b1, self.b2, self.eps = lr, b1, b2, eps
        self.iterations = tf.Variable(0, dtype=tf.int64, **slot)
        self.m = [tf.Variable(tf.zeros(p.shape), **slot) for p in params]
        self.v = [tf.Variable(tf.zeros(p.shape), **slot) for p in params]

    def apply(self, grads: list, params: list) -> None:
        t = tf.cast(self.iterations.assign_add(1), tf.float32)
        lr_t = self.lr * tf.sqrt(1.0 - self.b2**t) / (1.0 - self.b1**t)
        for g, p, m, v in zip(grads, params, self.m, self.v):
            m.assign(self.b1 * m + (1.0 - self.b1) * g)
            v.assign(self.b2 * v + (1.0 - self.b2) * tf.square(g))
            p.assign_sub(lr_t * m / (tf.sqrt(v) + self.eps))


def accuracy(model: MLP, x: np.ndarray, y: np.ndarray) -> float:
    predictions = tf.argmax(model(tf.constant(x)), axis=1, output_type=tf.int32)
    return float(tf.reduce_mean(tf.cast(predictions == y, tf.float32)))


def write_marker(model_dir: str, text: str) -> None:
    """Write DONE atomically, so a polling server never reads half a marker."""
    tmp = os.path.join(model_dir, f".DONE.{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(text + "\n")
    os.replace(tmp, os.path.join(model_dir, "DONE"))


def read_marker(model_dir: str):
    try:
        with open(os.path.join(model_dir, "DONE")) as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


def train(args: argparse.Namespace, strategy, coordinator) -> None:
    """Train, evaluate and save. ``coordinator`` is None without a cluster."""
    x_train, y_train, x_test, y_test = load_data()
    steps_per_epoch = -(-len(x_train) // args.batch_size)  # ceil

    with strategy.scope():  # under the PS strategy, variables go to the ps tasks
        model = MLP()
        optimizer = Adam(model.trainable_variables, args.learning_rate)
    params = list(model.trainable_variables)

    def dataset_fn(_input_context) -> tf.data.Dataset:
        # Repeated, so that each worker's iterator never runs dry; the data
        # travels to the workers inside this function, they need no sklearn.
        # Every worker gets the same seed (PS strategy gives each worker input
        # pipeline id 0); the asynchronous steps interleave anyway.
        ds = tf.data.Dataset.from_tensor_slices((x_train, y_train))
        ds = ds.shuffle(len(x_train), seed=SEED).repeat()
        return ds.batch(args.batch_size).prefetch(2)

    @tf.function
    def per_worker_dataset_fn():
        return strategy.distribute_datasets_from_function(dataset_fn)

    @tf.function
    def train_step(iterator) -> tf.Tensor:
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(
                    tf.nn.sparse_softmax_cross_entropy_with_logits(y, model(x)))
            optimizer.apply(tape.gradient(loss, params), params)
            return loss

        x, y = next(iterator)
        return strategy.run(replica_fn, args=(x, y))

    if coordinator is not None:
        iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))
    else:
        iterator = iter(per_worker_dataset_fn())

    os.makedirs(args.log_dir, exist_ok=True)
    writer = tf.summary.create_file_writer(args.log_dir)
    test_acc = 0.0
    for epoch in range(1, args.epochs + 1):
        if coordinator is not None:
            # schedule() returns at once; the steps run on whichever worker is
            # free. join() waits for all of them: the end of the epoch.
            losses = [coordinator.schedule(train_step, args=(iterator,))
                      for _ in range(steps_per_epoch)]
            coordinator.join()
            losses = [float(loss.fetch()) for loss in losses]
        else:
            losses = [float(train_step(iterator)) for _ in range(steps_per_epoch)]
        loss = float(np.mean(losses))
        test_acc = accuracy(model, x_test, y_test)  # reads the variables from ps
        with writer.as_default():
            for name, value in (("loss", loss), ("test_accuracy", test_acc)):
                tf.summary.write(name, tf.constant(value, tf.float32),
                                 step=epoch, metadata=SCALAR)
        print(f"epoch {epoch}/{args.epochs}: loss {loss:.4f}, "
              f"test accuracy {test_acc:.4f}", flush=True)
        writer.flush()  # so that TensorBoard shows a long run as it goes

    steps = int(optimizer.iterations.numpy())
    print(f"test accuracy: {test_acc:.4f}", flush=True)
    with open(os.path.join(args.model_dir, "metrics.json"), "w") as f:
        json.dump({"test_accuracy": round(test_acc, 4), "epochs": args.epochs,
                   "steps": steps}, f)
    path = tf.train.Checkpoint(model=model, optimizer=optimizer).save(
        os.path.join(args.model_dir, "ckpt"))
    print(f"checkpoint: {path}", flush=True)


def exit_now(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_chief(args: argparse.Namespace, in_cluster: bool) -> None:
    os.makedirs(args.model_dir, exist_ok=True)
    # A marker from a previous run must go before this run starts; the servers
    # ignore it anyway (see the module docstring).
    if os.path.exists(os.path.join(args.model_dir, "DONE")):
        os.remove(os.path.join(args.model_dir, "DONE"))
    run_id = uuid.uuid4().hex
    # A terminated chief must still tell the servers, or they would wait forever.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    tf.random.set_seed(SEED)
    try:
        if in_cluster:
            resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
            strategy = tf.distribute.ParameterServerStrategy(resolver)
            coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(
                strategy)
        else:
            strategy, coordinator = tf.distribute.get_strategy(), None
        train(args, strategy, coordinator)
    except BaseException as exc:
        write_marker(args.model_dir, f"failed {run_id}")
        if not in_cluster:
            raise
        # Same outcome as re-raising, without the noisy teardown (see below).
        traceback.print_exc()
        code = exc.code if isinstance(exc, SystemExit) else 1
        exit_now(code if isinstance(code, int) and code else 1)
    write_marker(args.model_dir, f"ok {run_id}")
    if in_cluster:
        # The servers leave as soon as they see DONE. A normal interpreter exit
        # would then try to release functions on them and log pages of
        # "Connection refused"; everything is on disk already, so leave now.
        exit_now(0)


def run_server(args: argparse.Namespace, cluster: dict, job: str, index: int):
    stale = read_marker(args.model_dir)  # what an earlier run may have left
    tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=job,
                         task_index=index, protocol="grpc", start=True)
    print(f"{job} {index}: serving, waiting for {args.model_dir}/DONE", flush=True)
    while True:
        marker = read_marker(args.model_dir)
        if marker is not None and marker != stale:
            break
        time.sleep(POLL_SECONDS)
    status = marker.split()[0]
    if status == "ok":
        print(f"{job} {index}: training finished, exiting", flush=True)
    else:
        print(f"{job} {index}: error: the chief reports that training failed "
              f"({marker!r} in {args.model_dir}/DONE)", file=sys.stderr)
    # The TF2 server has no clean stop and join() never returns: leave at once.
    exit_now(0 if status == "ok" else 1)


def run_collective(args: argparse.Namespace, cluster: dict, job: str,
                   index: int) -> None:
    """The collective layout: every task trains its copy of the model in step.

    Each step, every task takes its own shard of the data, computes gradients
    on its part of the global batch (``--batch_size`` per task), and the
    gradients are averaged by all-reduce; the copies therefore stay equal.
    The chief, else worker 0, writes the logs, ``metrics.json`` and the
    checkpoint; every task returns after the last epoch.
    """
    # First, before any other TensorFlow op: it starts this task's server and
    # joins the others, as TF_CONFIG says.
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    writes = job == "chief" or ("chief" not in cluster and index == 0)
    tf.random.set_seed(SEED)
    x_train, y_train, x_test, y_test = load_data()
    global_batch = args.batch_size * strategy.num_replicas_in_sync
    steps_per_epoch = -(-len(x_train) // global_batch)  # ceil

    same = tf.VariableAggregation.ONLY_FIRST_REPLICA  # every copy updates alike
    with strategy.scope():
        model = MLP(aggregation=same)
        optimizer = Adam(model.trainable_variables, args.learning_rate,
                         aggregation=same)
    params = list(model.trainable_variables)

    def dataset_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        ds = tf.data.Dataset.from_tensor_slices((x_train, y_train))
        ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
        ds = ds.shuffle(len(x_train), seed=SEED).repeat()
        return ds.batch(ctx.get_per_replica_batch_size(global_batch)).prefetch(2)

    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))

    @tf.function
    def train_step(iterator) -> tf.Tensor:
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(
                    tf.nn.sparse_softmax_cross_entropy_with_logits(y, model(x)))
            grads = tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.MEAN, tape.gradient(loss, params))
            optimizer.apply(grads, params)
            return loss

        x, y = next(iterator)
        losses = strategy.run(replica_fn, args=(x, y))
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)

    if writes:
        os.makedirs(args.log_dir, exist_ok=True)
        os.makedirs(args.model_dir, exist_ok=True)
        writer = tf.summary.create_file_writer(args.log_dir)
    test_acc = 0.0
    for epoch in range(1, args.epochs + 1):
        loss = float(np.mean([float(train_step(iterator))
                              for _ in range(steps_per_epoch)]))
        test_acc = accuracy(model, x_test, y_test)
        if writes:
            with writer.as_default():
                for name, value in (("loss", loss), ("test_accuracy", test_acc)):
                    tf.summary.write(name, tf.constant(value, tf.float32),
                                     step=epoch, metadata=SCALAR)
            writer.flush()
        print(f"epoch {epoch}/{args.epochs}: loss {loss:.4f}, "
              f"test accuracy {test_acc:.4f}", flush=True)
    if writes:
        steps = int(optimizer.iterations.numpy())
        print(f"test accuracy: {test_acc:.4f}", flush=True)
        with open(os.path.join(args.model_dir, "metrics.json"), "w") as f:
            json.dump({"test_accuracy": round(test_acc, 4), "epochs": args.epochs,
                       "steps": steps, "tasks": strategy.num_replicas_in_sync}, f)
        path = tf.train.Checkpoint(model=model, optimizer=optimizer).save(
            os.path.join(args.model_dir, "ckpt"))
        print(f"checkpoint: {path}", flush=True)
    # Every collective is done; skip the teardown of the task's server, which
    # can wait on peers that have already left.
    exit_now(0)


def main() -> int:
    args = parse_args()
    tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    cluster = tf_config.get("cluster") or {}
    task = tf_config.get("task") or {}
    job, index = task.get("type", "chief"), int(task.get("index", 0))

    if not cluster:
        run_chief(args, in_cluster=False)
        return 0
    if not cluster.get("ps"):
        if not cluster.get("worker"):
            print("error: TF_CONFIG needs at least one 'worker' task",
                  file=sys.stderr)
            return 2
        if job == "evaluator":
            print("evaluator: unused, the chief evaluates as it trains; exiting")
            return 0
        run_collective(args, cluster, job, index)
        return 0
    if "chief" not in cluster:
        print("error: this program uses TensorFlow 2 parameter-server training, "
              "which needs a 'chief' task (the coordinator) in TF_CONFIG besides "
              "'ps' and 'worker'; the cluster has only: "
              f"{', '.join(sorted(cluster))}", file=sys.stderr)
        return 2
    if not cluster.get("ps") or not cluster.get("worker"):
        print("error: TF_CONFIG needs at least one 'ps' and one 'worker' task "
              "besides the 'chief'", file=sys.stderr)
        return 2
    if job == "chief":
        run_chief(args, in_cluster=True)
    elif job in ("ps", "worker"):
        run_server(args, cluster, job, index)
    elif job == "evaluator":
        print("evaluator: unused, the chief evaluates at the end; exiting")
    else:
        print(f"error: unknown task type {job!r} in TF_CONFIG", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
