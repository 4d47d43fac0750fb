"""A starter TensorFlow 2 program, written by `trainc init`: parameter-server
training of a small classifier. Replace the data and the model with yours;
keep the part that tells the tasks apart and ends them.

TF_CONFIG (set by trainc in the cluster and by `trainc run --local`) says
which task this process is:

* ``chief`` - the coordinator. It creates the variables (they live on the
  ``ps`` tasks), schedules training steps on the ``worker`` tasks, evaluates,
  writes ``metrics.json`` and a checkpoint into ``--model_dir``, and last the
  marker ``DONE`` there.
* ``ps``, ``worker`` - ``tf.distribute.Server``s that run what the chief sends
  them. A TF2 server never returns on its own, so they wait for ``DONE``
  (``--model_dir`` must be on a volume every task mounts) and then exit.
* no TF_CONFIG - trains alone in this process: ``python train.py``.

The data is generated (ten classes of noisy 8x8 images around fixed
prototypes), so nothing is downloaded.
"""

import argparse
import json
import os
import sys
import time
import uuid

# Before TensorFlow is imported; the environment can still override them.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.core.framework import summary_pb2  # noqa: E402

SEED = 7
CLASSES, PIXELS, SAMPLES, NOISE = 10, 64, 2000, 0.6
# Marks a summary as a TensorBoard scalar without the tensorboard package.
SCALAR = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
    data_class=summary_pb2.DATA_CLASS_SCALAR)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--learning_rate", type=float, default=0.1)
    p.add_argument("--log_dir", default="logs")
    p.add_argument("--model_dir", default="model")
    args, unknown = p.parse_known_args()
    if unknown:
        print(f"ignoring unknown arguments: {' '.join(unknown)}", flush=True)
    return args


def data():
    """The same train and test sets in every process."""
    rng = np.random.default_rng(SEED)
    prototypes = rng.random((CLASSES, PIXELS))
    y = rng.integers(0, CLASSES, SAMPLES).astype(np.int32)
    x = (prototypes[y] + NOISE * rng.standard_normal((SAMPLES, PIXELS))).astype(np.float32)
    cut = SAMPLES * 4 // 5
    return x[:cut], y[:cut], x[cut:], y[cut:]


class Model(tf.Module):
    """64 -> 32 (ReLU) -> 10, with plain SGD updates (Keras 3 optimizers do
    not support parameter-server training)."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(SEED)
        self.w1 = tf.Variable(rng.normal(0, 0.1, (PIXELS, 32)).astype(np.float32))
        self.b1 = tf.Variable(tf.zeros([32]))
        self.w2 = tf.Variable(rng.normal(0, 0.1, (32, CLASSES)).astype(np.float32))
        self.b2 = tf.Variable(tf.zeros([CLASSES]))
        self.steps = tf.Variable(0, dtype=tf.int64, trainable=False)

    def __call__(self, x):
        return tf.matmul(tf.nn.relu(tf.matmul(x, self.w1) + self.b1), self.w2) + self.b2


def train(args, strategy, coordinator):
    x_train, y_train, x_test, y_test = data()
    steps_per_epoch = -(-len(x_train) // args.batch_size)
    with strategy.scope():  # with parameter servers, the variables go there
        model = Model()
    params = [model.w1, model.b1, model.w2, model.b2]

    def dataset_fn(_context=None):
        ds = tf.data.Dataset.from_tensor_slices((x_train, y_train))
        return ds.shuffle(len(x_train), seed=SEED).repeat().batch(args.batch_size)

    @tf.function
    def per_worker_dataset():
        return strategy.distribute_datasets_from_function(dataset_fn)

    @tf.function
    def step(iterator):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(
                    tf.nn.sparse_softmax_cross_entropy_with_logits(y, model(x)))
            for p, g in zip(params, tape.gradient(loss, params)):
                p.assign_sub(args.learning_rate * g)
            model.steps.assign_add(1)
            return loss
        return strategy.run(replica_fn, args=next(iterator))

    if coordinator is not None:
        iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset))
    else:
        iterator = iter(per_worker_dataset())
    os.makedirs(args.log_dir, exist_ok=True)
    writer = tf.summary.create_file_writer(args.log_dir)
    accuracy = 0.0
    for epoch in range(1, args.epochs + 1):
        if coordinator is not None:
            # schedule() returns at once, the steps run on whichever worker is
            # free; join() waits for them all.
            losses = [coordinator.schedule(step, args=(iterator,))
                      for _ in range(steps_per_epoch)]
            coordinator.join()
            losses = [float(loss.fetch()) for loss in losses]
        else:
            losses = [float(step(iterator)) for _ in range(steps_per_epoch)]
        loss = float(np.mean(losses))
        predicted = tf.argmax(model(x_test), axis=1, output_type=tf.int32)
        accuracy = float(tf.reduce_mean(tf.cast(predicted == y_test, tf.float32)))
        with writer.as_default():
            for name, value in (("loss", loss), ("accuracy", accuracy)):
                tf.summary.write(name, tf.constant(value), step=epoch, metadata=SCALAR)
        writer.flush()
        print(f"epoch {epoch}/{args.epochs}: loss {loss:.4f}, test accuracy {accuracy:.4f}",
              flush=True)
    with open(os.path.join(args.model_dir, "metrics.json"), "w") as f:
        json.dump({"test_accuracy": round(accuracy, 4), "epochs": args.epochs,
                   "steps": int(model.steps.numpy())}, f)
    path = tf.train.Checkpoint(model=model).save(os.path.join(args.model_dir, "ckpt"))
    print(f"test accuracy: {accuracy:.4f}; checkpoint {path}", flush=True)


def marker(model_dir):
    try:
        with open(os.path.join(model_dir, "DONE")) as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


def set_marker(model_dir, text):
    tmp = os.path.join(model_dir, f".DONE.{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(text + "\n")
    os.replace(tmp, os.path.join(model_dir, "DONE"))  # atomic: never half read


def leave(code):
    # The servers' connections would make a normal exit log pages of errors
    # (and a server's never returns): everything is written, leave now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_chief(args, cluster):
    os.makedirs(args.model_dir, exist_ok=True)
    run_id = uuid.uuid4().hex  # the servers act on a marker of this run only
    tf.random.set_seed(SEED)
    if not cluster:
        train(args, tf.distribute.get_strategy(), None)
        return 0
    try:
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        strategy = tf.distribute.ParameterServerStrategy(resolver)
        coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
        train(args, strategy, coordinator)
    except BaseException as e:  # the servers must hear of it, or wait forever
        set_marker(args.model_dir, f"failed {run_id}")
        print(f"error: training failed: {e!r}", file=sys.stderr)
        leave(1)
    set_marker(args.model_dir, f"ok {run_id}")
    leave(0)


def run_server(args, cluster, job, index):
    os.makedirs(args.model_dir, exist_ok=True)
    stale = marker(args.model_dir)  # an earlier run's, if any
    tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=job,
                         task_index=index, protocol="grpc", start=True)
    print(f"{job} {index}: serving until {args.model_dir}/DONE says training is over",
          flush=True)
    while (done := marker(args.model_dir)) in (None, stale):
        time.sleep(0.2)
    ok = done.startswith("ok ")
    print(f"{job} {index}: training {'finished' if ok else 'failed'}, exiting", flush=True)
    leave(0 if ok else 1)


def main():
    args = parse_args()
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    cluster = config.get("cluster") or {}
    task = config.get("task") or {}
    job, index = task.get("type", "chief"), int(task.get("index", 0))
    if cluster and not ("chief" in cluster and cluster.get("ps") and cluster.get("worker")):
        print("error: TensorFlow 2 parameter-server training needs a 'chief', at least "
              f"one 'ps' and one 'worker' task; TF_CONFIG has: {', '.join(sorted(cluster))}",
              file=sys.stderr)
        return 2
    if job == "chief":
        return run_chief(args, cluster)
    if job in ("ps", "worker"):
        return run_server(args, cluster, job, index)
    print(f"{job} {index}: nothing to do in this program; exiting", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
