"""Federated learning: datasets held by workers, a loader that batches them where they are,
federated averaging, and rounds with a live chart.

    ds = sy.BaseDataset(data, targets, name="digits")
    fds = ds.federate((bob, alice, carol))               # slices held by the workers
    loader = sy.FederatedDataLoader(fds, batch_size=32, shuffle=True)
    avg = sy.federated_avg({"bob": m1, "alice": m2}, fds)
    fl = sy.federated.FedAvg(model, fds, lr=0.1); fl.run(5, evaluate=(x_test, y_test))
"""
from .averaging import federated_avg
from .chart import RoundChart
from .datasets import BaseDataset, FederatedDataset, WorkerDataset, split_by_label, worker_datasets
from .loader import FederatedDataLoader
from .rounds import FederatedRoundError, FedAvg, RoundResult, evaluate_classifier, run_rounds

__all__ = ["BaseDataset", "FedAvg", "FederatedDataLoader", "FederatedDataset", "FederatedRoundError", "RoundChart",
           "RoundResult", "WorkerDataset", "evaluate_classifier", "federated_avg", "run_rounds", "split_by_label",
           "worker_datasets"]
