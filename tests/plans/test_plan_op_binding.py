"""Issue 23: a plan's replay calls torch's own binding of a node's op (``torch.mm`` for
``aten.mm.default``) where that binding is seen, on meta tensors of the node's shapes, to reach
exactly that overload with exactly those arguments; other nodes keep the overload's own call.
What a user sees is unchanged: the same values, and a torch function mode sees the overloads."""
import torch
from torch.overrides import TorchFunctionMode

import syft_lab as sy
from syft_lab.plans.graph import Node, PlanGraph, Value, _binding

aten = torch.ops.aten


def _graph(nodes, inputs):
    specs = [{"name": f"x{i}", "role": "input", "shape": list(s), "dtype": "float32"} for i, s in enumerate(inputs)]
    return PlanGraph("g", specs, [], nodes, [Value("node", len(nodes) - 1)], True)


def test_a_node_takes_the_binding_only_where_it_is_the_same_overload():
    g = _graph([Node(aten.mm.default, [Value("input", 0), Value("input", 1)], {}, [((2, 2), "float32")]),
                Node(aten.mul.Scalar, [Value("node", 0), 2.0], {}, [((2, 2), "float32")]),
                Node(aten.pow.Tensor_Scalar, [Value("node", 1), 2], {}, [((2, 2), "float32")])],
               [(2, 3), (3, 2)])
    assert _binding(g, g.nodes[0]) is torch._C._VariableFunctions.mm
    assert _binding(g, g.nodes[1]) is None  # torch.mul(t, 2.0) is mul.Tensor: the overload's own call
    assert _binding(g, g.nodes[2]) is torch._C._VariableFunctions.pow  # pow(t, 2) is pow.Tensor_Scalar
    a, b = torch.randn(2, 3), torch.randn(3, 2)
    (out,) = g.run([a, b])
    assert torch.equal(out, ((a @ b) * 2.0) ** 2)


def test_a_traced_training_step_replays_to_the_eager_values():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    twin = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    twin.load_state_dict(model.state_dict())
    x, y = torch.randn(16, 4), torch.randn(16, 1)

    def step(m):
        def train_step(x, y):
            loss = ((m(x) - y) ** 2).mean()
            grads = torch.autograd.grad(loss, list(m.parameters()))
            with torch.no_grad():
                for p, g in zip(m.parameters(), grads):
                    p.sub_(0.1 * g)
            return loss
        return train_step

    plan = sy.plan(step(model), state=model).build(x, y)
    eager = step(twin)
    for _ in range(3):
        torch.testing.assert_close(plan(x, y), eager(x, y), rtol=0, atol=0)
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0)


def test_a_torch_function_mode_sees_the_overloads_of_a_replay():
    g = _graph([Node(aten.mm.default, [Value("input", 0), Value("input", 1)], {}, [((2, 2), "float32")])],
               [(2, 3), (3, 2)])
    a, b = torch.randn(2, 3), torch.randn(3, 2)
    g.run([a, b])
    seen = []

    class Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    with Watch():
        (out,) = g.run([a, b])
    assert aten.mm.default in seen and torch.equal(out, a @ b)
