"""The instructions of an emitted execution plan, by name: what an exported
program calls, in order, for the tests that read a program's structure."""

from __future__ import annotations

from executorch.exir.schema import DelegateCall, ExecutionPlan, KernelCall


def plan_calls(plan: ExecutionPlan) -> list[str]:
    """Each instruction of ``plan``: an operator as "name.overload"
    ("et_copy::_h2d_copy.out"), a delegate as "delegate:<backend id>"; other
    instructions (moves, jumps, frees) are left out."""
    names = []
    for chain in plan.chains:
        for i in chain.instructions:
            if isinstance(i.instr_args, KernelCall):
                op = plan.operators[i.instr_args.op_index]
                names.append(f"{op.name}.{op.overload}")
            elif isinstance(i.instr_args, DelegateCall):
                names.append("delegate:" + plan.delegates[i.instr_args.delegate_index].id)
    return names
