"""The fields of a metrics row that come from what an evaluation measured beyond its episodes'
outcomes: a data set's accuracies and a cluster's traffic (the generation loop's metrics_row and
the SGD baseline's step put them in; the run folder's files are nevo.runs's)."""

from __future__ import annotations

import numpy as np


def cluster_row(*results) -> dict:
    """On a Dask cluster, what the generation's evaluations moved and used: cluster/bytes_sent
    and cluster/bytes_received (the driver's pickled payloads: genomes and episode seeds out,
    per-episode results in), chunks, workers at the end and workers lost; {} on one machine."""
    parts = [r.cluster for r in results if r.cluster]
    if not parts:
        return {}
    total = {k: sum(p[k] for p in parts) for k in ("bytes_sent", "bytes_received", "chunks", "workers_lost")}
    return {f"cluster/{k}": v for k, v in total.items()} | {"cluster/workers": parts[-1]["workers"]}


def accuracy_row(train_accuracy, test_accuracy, validated: bool = True) -> dict:
    """A supervised task's accuracies (Results.accuracy of the training and the validation
    evaluations): the training batches' mean and the validation's (ES: theta on the test set; the
    GA: its elite candidates' mean; none where the algorithm skipped this generation's
    validation); {} for every other task (None)."""
    if train_accuracy is None:
        return {}
    row = {"score/train_accuracy": float(np.mean(train_accuracy))}
    if validated:
        tested = test_accuracy is not None and len(test_accuracy) > 0
        row["score/test_accuracy"] = float(np.mean(test_accuracy)) if tested else float("nan")
    return row
