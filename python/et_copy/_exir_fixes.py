"""Workarounds for executorch 1.5.1's AOT stack, each scoped to our calls.

- **Lifted constants of a method with no inputs.** to_edge lifts the
  constants that its scalar-to-tensor pass creates (``x * 0.5``) into
  placeholders inserted before the first user input. A method with no user
  input (an LLM's ``decode_next()``) has none to insert before, so each goes
  to the graph's start, ahead of the previous one: reversed, while the
  signature lists them in order, and the verifier then refuses the program
  ("Input spec name _lifted_tensor_constantN does not match node name ...").
  After the pass we put them after every other input, in order, where the
  pass puts them in a method with inputs.
  tests/python/test_export.py tells when upstream no longer needs this.
"""

from __future__ import annotations

import contextlib

import executorch.exir.program._program as _program


def _constants_last(ep, lifted: list[str]):
    """Moves the placeholders and input specs of ``lifted`` (names of
    constants the pass just lifted) after every other input, in the order
    they were lifted: where the pass puts them in a program with inputs."""
    specs = ep.graph_signature.input_specs
    by_name = {s.arg.name: s for s in specs}
    if not all(name in by_name for name in lifted):
        return ep  # not a shape this fix knows: leave it to the verifier
    ep.graph_signature.input_specs = [s for s in specs if s.arg.name not in lifted] + [by_name[n] for n in lifted]
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    order = [placeholders[s.arg.name] for s in ep.graph_signature.input_specs]
    anchor = next(iter(ep.graph.nodes))
    if anchor is not order[0]:
        anchor.prepend(order[0])
    for before, node in zip(order, order[1:]):
        before.append(node)
    ep.graph_module.recompile()
    return ep


@contextlib.contextmanager
def lifted_constants_in_signature_order():
    """While to_edge runs, programs with no user input keep their lifted
    constants' placeholders in the signature's order."""
    original = _program.lift_constant_tensor_pass

    def lift(ep):
        before = {s.arg.name for s in ep.graph_signature.input_specs}
        ep = original(ep)
        if not ep.graph_signature.user_inputs:
            lifted = [s.arg.name for s in ep.graph_signature.input_specs if s.arg.name not in before]
            if lifted:
                ep = _constants_last(ep, lifted)
        return ep

    _program.lift_constant_tensor_pass = lift
    try:
        yield
    finally:
        _program.lift_constant_tensor_pass = original
