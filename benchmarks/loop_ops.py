"""How many ops each loop of an exported search runs per iteration.

On TensorFlow's executor a decoding step costs about as much per op as per
FLOP (BENCHMARKS.md section 4i), so the op count of the search's loop body
is the figure to cut. Reads the SavedModel's graph (no call is run) and
prints, for each `While` of each signature, the body's node count, how many
of them are `Const` (cheap, but still scheduled every iteration) and the
most common op types. The counts are the graph as saved, before Grappler
rewrites it at load time.

    python benchmarks/loop_ops.py saved_models/headlines/1 --signature greedy
"""

from __future__ import annotations

import argparse
import collections
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model_dir", help="SavedModel folder (a version folder)")
    p.add_argument("--signature", default="greedy", help="signature to inspect")
    p.add_argument("--top", type=int, default=10, help="op types listed per loop")
    return p.parse_args(argv)


def loops(library, root):
    """`(while node name, body FunctionDef)` reachable from function `root`."""
    functions = {f.signature.name: f for f in library.function}
    seen, stack, found = set(), [root], []
    while stack:
        name = stack.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        for node in functions[name].node_def:
            for attr in node.attr.values():
                if attr.func.name:
                    stack.append(attr.func.name)
            if node.op in ("While", "StatelessWhile"):
                found.append((node.name, functions[node.attr["body"].func.name]))
    return found


def main(argv=None):
    args = parse_args(argv)
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((Path(args.model_dir) / "saved_model.pb").read_bytes())
    graph = saved.meta_graphs[0]
    signature = graph.signature_def[args.signature]
    # The signature's outputs come from one call of its traced function.
    root = next(
        node.attr["f"].func.name
        for node in graph.graph_def.node
        if node.op in ("StatefulPartitionedCall", "PartitionedCall")
        and any(t.name.split(":")[0] == node.name for t in signature.outputs.values())
    )
    for name, body in loops(graph.graph_def.library, root):
        ops = collections.Counter(n.op for n in body.node_def)
        print(
            f"{name}: {len(body.node_def)} nodes a step, {ops['Const']} Const; "
            + ", ".join(f"{op} {n}" for op, n in ops.most_common(args.top))
        )


if __name__ == "__main__":
    main()
