"""Layered (Sugiyama-style) layout of a directed graph, top to bottom, in pure networkx.

graphviz `dot` takes minutes above a few thousand nodes; a training graph has ~7,000.  Here a
node's layer is its longest-path depth from the sources (computed on the condensation, so a graph
whose collapsed scopes form a cycle still lays out), and the order inside each layer comes from a
few barycenter sweeps, which untangle most crossings in O(sweeps * edges).
"""

from __future__ import annotations

from collections import defaultdict

import networkx as nx


def levels(graph: nx.DiGraph) -> dict:
    """Longest-path depth of every node from the sources (nodes on a cycle share a level)."""
    condensed = nx.condensation(graph)
    depth: dict[int, int] = {}
    for component in nx.topological_sort(condensed):
        preds = [depth[p] + 1 for p in condensed.predecessors(component)]
        depth[component] = max(preds, default=0)
    members = condensed.graph["mapping"]
    return {node: depth[members[node]] for node in graph.nodes}


def _barycenter_order(layers, neighbours, position) -> None:
    for layer in layers:
        def key(node, layer=layer):
            near = [position[n] for n in neighbours(node) if n in position]
            return sum(near) / len(near) if near else position[node]

        layer.sort(key=key)
        for index, node in enumerate(layer):
            position[node] = index - (len(layer) - 1) / 2


def layered_layout(graph: nx.DiGraph, sweeps: int = 4, initial: dict | None = None) -> dict:
    """Map each node to (x, y): y = -level (sources on top), x its centred place in the layer.

    ``initial`` (node -> (x, y) or x) seeds each layer's order with earlier positions, so a
    redraw after expanding a cluster keeps the rest of the picture where it was (nodes it lacks
    keep their insertion order among those it has)."""
    if graph.number_of_nodes() == 0:
        return {}
    depth = levels(graph)
    by_level: dict[int, list] = defaultdict(list)
    for node in graph.nodes:  # insertion order gives a stable first guess
        by_level[depth[node]].append(node)
    layers = [by_level[level] for level in sorted(by_level)]
    if initial:
        for layer in layers:
            def seed(item, layer=layer):
                index, node = item
                if node in initial:
                    old = initial[node]
                    return (old[0] if isinstance(old, tuple) else old, index)
                return (index - (len(layer) - 1) / 2, index)

            layer[:] = [node for _, node in sorted(enumerate(layer), key=seed)]
    position = {}
    for layer in layers:
        for index, node in enumerate(layer):
            position[node] = index - (len(layer) - 1) / 2
    for _ in range(sweeps):
        _barycenter_order(layers[1:], graph.predecessors, position)
        _barycenter_order(layers[-2::-1], graph.successors, position)
    return {node: (position[node], -depth[node]) for node in graph.nodes}
