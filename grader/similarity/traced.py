"""What a student's function traces to, in a form two copies share however they were written.

Measures: the program JAX sees. A copy with its variables renamed, its independent lines reordered,
``jnp.where`` written as ``lax.select``, ``x ** 2`` as ``x * x`` or a helper inlined (jitted or not) is
one program to JAX; :func:`canonical` gives those the same :class:`Canonical` (equal ``digest``), and its
``features`` (name-free, order-free pieces of the dataflow graph) let the ranking weigh how much of two
different programs is alike.

How (each step a function below):

* **inlined**: the bodies of ``jit``/``pjit``, ``closed_call``, ``custom_jvp_call``, ``custom_vjp_call``
  and ``remat`` are spliced into the caller, so a helper under ``@jax.jit`` is the same as one that is not,
  and as its body written out; control flow (``cond``, ``while``, ``scan``) keeps its bodies, each
  canonicalised on its own and printed into the parameter;
* **normalised**: a ``convert_element_type`` of a literal is that literal of the new type, one to the type
  the value already has is no equation; ``integer_pow[y=2]`` and ``square`` are ``mul x x``; ``gt``/``ge``
  are ``lt``/``le`` with their arguments swapped; a commutative primitive's arguments are sorted;
  literals are their type only (``lit:f32[]``), never their value;
* **merged and pruned**: two equations that compute the same thing from the same arguments are one
  (common subexpressions, as XLA merges them), and an equation nothing uses is dropped (unless it has
  an effect, such as ``debug_print``);
* **ordered**: each equation's key is a hash of its primitive, parameters and its arguments' keys (a
  Merkle hash, blind to names and order); the equations are listed in a topological order in which
  independent ones come by key, and the variables are named by that order.

``jnp.where`` against ``lax.select`` in the installed JAX (0.10.2, checked with ``jax.make_jaxpr``):
``jnp.where(c, a, b)`` traces to ``jit[name=_where jaxpr={... select_n c b a ...}]``, and when a branch
is a Python scalar the body first has ``convert_element_type`` of the literal then ``broadcast_in_dim``;
``lax.select(c, a, b)`` traces to ``select_n c b a`` directly (its scalar branch is a caller's
``broadcast_in_dim`` of a literal). Once the ``_where`` jit is inlined and the literal's conversion
folded, both are the same equations. ``jnp.where(x > 0, x, 0)`` and ``... 0.0)`` differ only in the
literal's type before that conversion, so they are the same too. ``jnp.maximum(x, 0)`` is ``max``: a
different program, as it should be.
"""
from __future__ import annotations

import hashlib
import heapq
import re
from dataclasses import dataclass, field

from grader.similarity.jaxpr_text import Arg, Eqn, Jaxpr, Value, parse

#: primitives whose body is spliced into the caller (names across JAX 0.4.30 to 0.10)
INLINED = frozenset({"jit", "pjit", "xla_call", "closed_call", "core_call", "named_call", "custom_jvp_call",
                     "custom_vjp_call", "custom_vjp_call_jaxpr", "remat", "remat2", "checkpoint"})
_BODY_KEYS = ("jaxpr", "call_jaxpr", "fun_jaxpr")
COMMUTATIVE = frozenset({"add", "mul", "max", "min", "and", "or", "xor", "eq", "ne", "add_any"})
_SWAPPED = {"gt": "lt", "ge": "le"}
#: primitives kept even when nothing uses their result
EFFECTFUL = frozenset({"debug_print", "debug_callback", "io_callback", "pure_callback"})
_ALIASES = frozenset({"copy", "copy_p", "optimization_barrier"})


def _hash(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


@dataclass(frozen=True)
class Ref:
    """A value in the flattened program: an input (``in``), a constant (``const``), a literal (``lit``) or
    output ``index`` of a node; ``type`` as printed."""
    #: ``in``, ``const``, ``lit`` or ``node``
    kind: str
    #: the value's type as printed
    type: str
    #: the node that made it (``node`` references), else -1
    node: int = -1
    #: which of that node's outputs, or which input
    index: int = 0


@dataclass
class Node:
    #: its primitive
    prim: str
    #: its parameters that change what it computes, as canonical text
    params: str
    #: what it is applied to
    args: list[Ref]
    #: its outputs' types
    types: list[str]
    #: a name-free description of it and of everything it depends on (the canonical order's key)
    key: str = ""
    #: the features of a body it keeps (a loop's, a branch's), not inlined
    inner_features: frozenset[str] = frozenset()


@dataclass
class _Flat:
    """A jaxpr with every inlined call spliced in: nodes in a valid order, the outputs as references."""
    #: the program's inputs
    inputs: list[Ref]
    #: its equations, every call inlined, in a valid order
    nodes: list[Node] = field(default_factory=list)
    #: what it returns
    outs: list[Ref] = field(default_factory=list)


@dataclass(frozen=True)
class Canonical:
    """One function's (or several functions') trace, canonical: ``equations`` as text
    (``v3:f32[3] = mul v1 v2``), ``signature`` (inputs and outputs), ``digest`` (equal exactly when both are
    equal) and ``features`` (hashes of the dataflow graph's pieces: each equation, each edge, each path of
    two edges, each equation's whole subgraph)."""
    #: the equations as text, variables renamed in canonical order
    equations: tuple[str, ...]
    #: its inputs' and outputs' types
    signature: str
    #: equal exactly when equations and signature are
    digest: str
    #: hashes of the dataflow graph's pieces, for the class's rarity-weighted score
    features: frozenset[str]


def canonical(jaxpr_text: str) -> Canonical:
    """The canonical form of a printed jaxpr (of several printed one after another: each one's equations
    after a ``# signature`` line, in their order); :class:`ValueError` when the text is not a printed jaxpr."""
    parts = [_canonical_of(jaxpr) for jaxpr in parse(jaxpr_text)]
    if len(parts) == 1:
        return parts[0]
    equations = tuple(line for part in parts for line in (f"# {part.signature}", *part.equations))
    signature = " | ".join(part.signature for part in parts)
    return Canonical(equations, signature, _hash("\n".join((signature, *equations))),
                     frozenset().union(*(part.features for part in parts)))


def _canonical_of(jaxpr: Jaxpr) -> Canonical:
    flat = _Flat([Ref("in", var.type, index=i) for i, var in enumerate(jaxpr.invars)])
    env = {var.name: ref for var, ref in zip(jaxpr.invars, flat.inputs)}
    env.update({var.name: Ref("const", var.type, index=i) for i, var in enumerate(jaxpr.consts)})
    flat.outs = _splice(jaxpr, env, flat)
    nodes, outs = _merged(flat)
    order = _ordered(nodes, outs)
    equations, out_text = _rendered(nodes, order, outs, flat.inputs)
    signature = f"({' '.join(ref.type for ref in flat.inputs)}) -> {out_text}"
    return Canonical(tuple(equations), signature, _hash("\n".join((signature, *equations))),
                     _features(nodes, order, outs))


def _resolve(arg: Arg, env: dict[str, Ref]) -> Ref:
    if arg.type is None and arg.text in env:
        return env[arg.text]
    return Ref("lit", arg.type or "?")


def _splice(jaxpr: Jaxpr, env: dict[str, Ref], flat: _Flat) -> list[Ref]:
    """Append ``jaxpr``'s equations to ``flat`` (its variables bound in ``env``); its outputs' references."""
    for equation in jaxpr.eqns:
        args = [_resolve(arg, env) for arg in equation.args]
        body = _body(equation)
        if body is not None:
            inner = _bound(body, args)
            if inner is not None:
                env.update({var.name: ref for var, ref in zip(equation.outs, _splice(body, inner, flat))})
                continue
        env.update({var.name: ref for var, ref in zip(equation.outs, _emitted(equation, args, flat))})
    return [_resolve(arg, env) for arg in jaxpr.outs]


def _bound(body: Jaxpr, args: list[Ref]) -> dict[str, Ref] | None:
    """An inlined body's variables bound to the call's arguments (its constants too when the call passes
    them, else as constants of its own); None when the counts do not match."""
    if len(args) == len(body.consts) + len(body.invars):
        return {var.name: ref for var, ref in zip([*body.consts, *body.invars], args)}
    if len(args) != len(body.invars):
        return None
    bound = {var.name: Ref("const", var.type, index=i) for i, var in enumerate(body.consts)}
    return bound | {var.name: ref for var, ref in zip(body.invars, args)}


def _body(eqn: Eqn) -> Jaxpr | None:
    if eqn.prim not in INLINED:
        return None
    for key, value in eqn.params:
        if key in _BODY_KEYS and len(value) == 1 and isinstance(value[0], Jaxpr):
            return value[0]
    return None


def _emitted(eqn: Eqn, args: list[Ref], flat: _Flat) -> list[Ref]:
    """The references of ``eqn``'s results once normalised, appending a node to ``flat`` when one is needed."""
    types = [var.type for var in eqn.outs]
    params = [(key, value) for key, value in eqn.params if key != "name"]
    prim = eqn.prim
    if prim == "convert_element_type" and len(args) == 1 and (args[0].kind == "lit" or args[0].type == types[0]):
        return [Ref("lit", types[0])] if args[0].kind == "lit" else [args[0]]
    if prim in _ALIASES and len(args) == len(types):
        return list(args)
    if (prim == "square" or (prim == "integer_pow" and _text(params) == "y=2")) and len(args) == 1:
        prim, params, args = "mul", [], [args[0], args[0]]
    if prim in _SWAPPED and len(args) == 2:
        prim, args = _SWAPPED[prim], [args[1], args[0]]
    inner = [part for _, value in params for part in value if isinstance(part, Jaxpr)]
    canon = [_canonical_of(jaxpr) for jaxpr in inner]
    node = Node(prim, _text(params, iter(canon)), args, types,
                inner_features=frozenset(f"inner:{f}" for c in canon for f in c.features))
    flat.nodes.append(node)
    return [Ref("node", type_, len(flat.nodes) - 1, i) for i, type_ in enumerate(types)]


def _text(params: list[tuple[str, Value]], canon=None) -> str:
    """The parameters as text, each nested jaxpr as its canonical equations, every address blanked."""
    pieces = []
    for key, value in params:
        parts = [_nested(next(canon)) if canon is not None and isinstance(part, Jaxpr) else str(part)
                 for part in value]
        pieces.append(f"{key}={_compact(' '.join(parts))}")
    return " ".join(pieces)


def _nested(inner: Canonical) -> str:
    return "{" + "; ".join((*inner.equations, inner.signature)) + "}"


def _compact(text: str) -> str:
    text = re.sub(r"\s+", " ", text.replace(" at 0x", " at ")).strip()
    return re.sub(r"\s*([,)\]}])", r"\1", re.sub(r"([(\[{])\s*", r"\1", text))


def _key(ref: Ref, nodes: list[Node]) -> str:
    if ref.kind == "node":
        return nodes[ref.node].key + (f"#{ref.index}" if len(nodes[ref.node].types) > 1 else "")
    if ref.kind == "lit":
        return f"lit:{ref.type}"
    return f"{ref.kind}{ref.index}:{ref.type}"


def _merged(flat: _Flat) -> tuple[list[Node], list[Ref]]:
    """The nodes keyed (Merkle), one per key (common subexpressions merged), those that matter only."""
    nodes: list[Node] = []
    first: dict[str, int] = {}
    moved: dict[int, int] = {}
    for number, node in enumerate(flat.nodes):
        args = [Ref(a.kind, a.type, moved[a.node], a.index) if a.kind == "node" else a for a in node.args]
        keys = [_key(arg, nodes) for arg in args]
        if node.prim in COMMUTATIVE:
            args = [arg for _, arg in sorted(zip(keys, args), key=lambda pair: pair[0])]
            keys.sort()
        effect = f"@{number}" if node.prim in EFFECTFUL else ""
        node.args, node.key = args, _hash(f"{node.prim}[{node.params}]({','.join(keys)}){node.types}{effect}")
        if node.key not in first:
            first[node.key] = len(nodes)
            nodes.append(node)
        moved[number] = first[node.key]
    outs = [Ref(r.kind, r.type, moved[r.node], r.index) if r.kind == "node" else r for r in flat.outs]
    return nodes, outs


def _ordered(nodes: list[Node], outs: list[Ref]) -> list[int]:
    """The live nodes' indices in topological order, independent ones by key (Kahn's algorithm)."""
    live = {i for i, node in enumerate(nodes) if node.prim in EFFECTFUL}
    live |= {ref.node for ref in outs if ref.kind == "node"}
    stack = list(live)
    while stack:
        for arg in nodes[stack.pop()].args:
            if arg.kind == "node" and arg.node not in live:
                live.add(arg.node)
                stack.append(arg.node)
    waiting = {i: len({a.node for a in nodes[i].args if a.kind == "node"}) for i in live}
    users: dict[int, set[int]] = {}
    for i in live:
        for arg in nodes[i].args:
            if arg.kind == "node":
                users.setdefault(arg.node, set()).add(i)
    ready = [(nodes[i].key, i) for i, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(i)
        for user in users.get(i, ()):
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, (nodes[user].key, user))
    return order


def _rendered(nodes: list[Node], order: list[int], outs: list[Ref], inputs: list[Ref]) -> tuple[list[str], str]:
    names: dict[tuple[int, int], str] = {}

    def name(ref: Ref) -> str:
        if ref.kind == "node":
            return names[(ref.node, ref.index)]
        return {"in": f"a{ref.index}", "const": f"c{ref.index}"}.get(ref.kind, f"lit:{ref.type}")

    lines = []
    for i in order:
        node = nodes[i]
        args = " ".join(name(arg) for arg in node.args)
        for j, type_ in enumerate(node.types):
            names[(i, j)] = f"v{len(names)}"
        binders = " ".join(f"{names[(i, j)]}:{type_}" for j, type_ in enumerate(node.types))
        params = f"[{node.params}]" if node.params else ""
        lines.append(f"{binders + ' = ' if binders else ''}{node.prim}{params} {args}".strip())
    return lines, f"({', '.join(name(ref) for ref in outs)})"


def _label(ref: Ref, nodes: list[Node]) -> str:
    if ref.kind != "node":
        return f"{ref.kind}:{ref.type}"
    node = nodes[ref.node]
    return f"{node.prim}[{node.params}]:{','.join(node.types)}#{ref.index}"


def _features(nodes: list[Node], order: list[int], outs: list[Ref]) -> frozenset[str]:
    """Name-free, order-free pieces of the graph: each node's label, each edge (producer, position, user),
    each path of two edges, each node's whole subgraph (its key) and each output's."""
    found: set[str] = set()
    for i in order:
        node = nodes[i]
        here = _label(Ref("node", "", i), nodes)
        found.add(here)
        found.add(f"sub:{node.key}")
        found |= node.inner_features
        for position, arg in enumerate(node.args):
            at = "*" if node.prim in COMMUTATIVE else str(position)
            found.add(f"{_label(arg, nodes)} -{at}-> {here}")
            if arg.kind == "node":
                before = nodes[arg.node]
                for inner_position, inner in enumerate(before.args):
                    found.add(f"{_label(inner, nodes)} -{inner_position}-> {_label(arg, nodes)} -{at}-> {here}")
    found |= {f"out{i}:{_key(ref, nodes)}" for i, ref in enumerate(outs)}
    return frozenset(_hash(feature) for feature in found)
