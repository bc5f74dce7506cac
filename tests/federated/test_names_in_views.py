"""Every pointer the federated kit holds for a notebook is named in the views (issue 39.3:
notebook 07 showed "unnamed" rows): a round client's inbox and plan by their FedAvg path, and a
loader's paused epoch holds no pointer of its own once the notebook let go of its batch."""
import torch

import syft_lab as sy
from test_rounds import blobs, net


def unnamed(namespace) -> list[dict]:
    me = next(w for w in sy.world(namespace)["workers"] if w["id"] == "me")
    return [o for o in me["objects"] if "location" in o and not o.get("names") and not o.get("held_in")]


def test_fedavg_and_a_loader_leave_no_unnamed_pointer(trio, unload):
    x, y = blobs()
    fds = sy.BaseDataset(x, y, name="blobs").federate(trio, indices=[range(0, 12), range(12, 21), range(21, 30)])
    try:
        loader = sy.FederatedDataLoader(fds, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(0))
        ns = {"fds": fds, "loader": loader}
        data, target = next(iter(loader))
        del data, target  # the notebook lets go of its first batch: nothing of it stays
        assert unnamed(ns) == []
        fl = sy.federated.FedAvg(net(), fds, lr=0.2, batch_size=5, plans=True)
        fl.run(1)
        ns["fl"] = fl
        assert unnamed(ns) == []
        paths = {p for o in sy.world(ns)["workers"][0]["objects"] for p in o.get("held_in") or ()}
        assert any(p.endswith(".inbox") for p in paths) and any(p.endswith(".plan") for p in paths), sorted(paths)
        del fl, ns["fl"]
    finally:
        unload(fds)
