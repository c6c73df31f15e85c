"""Child process of test_call_orders.py: drives et_copy.runtime's stateful
calls (load, new_session, load_method, execute, reset, metadata, writing an
ETDump, dropping objects, garbage collection) in the orders hypothesis's
stateful testing picks, on the programs named on the command line.

    python call_orders_child.py OUT_DIR SEED EXAMPLES PROGRAM.pte...

Each call either works or raises what the API documents (EtCopyError,
TypeError, ValueError); any other exception fails the run (exit 1), and a
crash ends it by a signal, which the parent reports. Each step is printed,
flushed, before it runs, so the last lines name the call that crashed.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import et_copy
import et_copy.runtime as rt
import torch
from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, precondition, rule, run_state_machine_as_test

OUT = Path(sys.argv[1])
SEED, EXAMPLES, STEPS = int(sys.argv[2]), int(sys.argv[3]), 30
PROGRAMS = [Path(p) for p in sys.argv[4:]]
EXPECTED = (et_copy.EtCopyError, TypeError, ValueError)
# An ETDump file is a size-prefixed flatbuffer: its size, its root offset, then its identifier.
ETDUMP_ID = b"ED00"


def step(*words: object) -> None:
    print(*words, flush=True)


def inputs_for(method: rt.Method) -> list:
    meta = method.metadata
    return [
        torch.ones(meta.input_tensor_meta(i).sizes(), dtype=meta.input_tensor_meta(i).torch_dtype())
        for i in range(meta.num_inputs())
    ]


def read_metadata(meta: rt.MethodMetadata) -> None:
    """Every accessor, each tensor's repr included."""
    repr(meta)
    for i in range(meta.num_inputs()):
        if meta.input_tag(i) is None:
            repr(meta.input_tensor_meta(i))
    for i in range(meta.num_outputs()):
        if meta.output_tag(i) is None:
            repr(meta.output_tensor_meta(i))
    for i in range(meta.num_attributes()):
        repr(meta.attribute_tensor_meta(i))
    for i in range(meta.num_memory_planned_buffers()):
        meta.memory_planned_buffer_size(i), meta.memory_planned_buffer_device(i)


class CallOrders(RuleBasedStateMachine):
    programs = Bundle("programs")
    sessions = Bundle("sessions")
    methods = Bundle("methods")

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.live_programs = 0  # few at a time, so the other calls get their turn
        self.dropped = 0  # objects dropped since the last collection

    @precondition(lambda self: self.live_programs < 2)
    # 16 bytes: too few for any execution's logged values (refused after the run).
    @rule(
        target=programs, which=st.sampled_from(PROGRAMS), etdump=st.booleans(), debug=st.sampled_from([0, 16, 1 << 12])
    )
    def load(self, which, etdump, debug):
        step("load", which.name, etdump, debug)
        self.live_programs += 1
        return rt.load(which, enable_etdump=etdump, debug_buffer_size=debug)

    @rule(target=sessions, program=programs)
    def new_session(self, program):
        step("new_session")
        return program.new_session()

    # The test programs' method names, and one no program has.
    @rule(target=methods, owner=st.one_of(programs, sessions), name=st.sampled_from(["forward", "add", "missing"]))
    def load_method(self, owner, name):
        step("load_method", type(owner).__name__, name)
        try:
            return owner.load_method(name)
        except EXPECTED as e:
            step("  refused:", str(e).splitlines()[0])
            return None

    # Loading and running in one step: executions are what a profile records.
    @rule(target=methods, owner=st.one_of(programs, sessions), name=st.sampled_from(["forward", "add"]))
    def run(self, owner, name):
        step("run", type(owner).__name__, name)
        try:
            method = owner.load_method(name)
            method.execute(inputs_for(method))
        except EXPECTED as e:
            step("  refused:", str(e).splitlines()[0])
            return None
        return method

    @rule(method=methods, outputs=st.booleans())
    def execute(self, method, outputs):
        if method is None:
            return
        step("execute", method.name, outputs)
        try:
            if outputs:
                method.execute(inputs_for(method), outputs=[None] * method.metadata.num_outputs())
            else:
                method.execute(inputs_for(method))
        except EXPECTED as e:
            step("  refused:", str(e).splitlines()[0])

    @rule(session=sessions)
    def reset(self, session):
        step("reset")
        try:
            session.reset()
        except EXPECTED as e:
            step("  refused:", str(e).splitlines()[0])

    @rule(program=programs)
    def metadata(self, program):
        for name in sorted(program.method_names):
            step("metadata", name)
            read_metadata(program.metadata(name))

    @rule(method=methods)
    def method_metadata(self, method):
        if method is not None:
            step("method.metadata", method.name)
            read_metadata(method.metadata)

    @rule(program=programs, where=st.sampled_from(["file", "missing_dir", "debug_missing_dir"]))
    def write_etdump(self, program, where):
        self.writes += 1
        path = OUT / f"{self.writes}.etdp"
        debug = OUT / f"{self.writes}.bin"
        if where == "missing_dir":
            path = OUT / "missing" / "a.etdp"
        elif where == "debug_missing_dir":
            debug = OUT / "missing" / "a.bin"
        step("write_etdump", where)
        try:
            program.write_etdump_result_to_file(path, debug)
        except et_copy.EtCopyError as e:
            step("  refused:", str(e).splitlines()[0])
            return
        data = path.read_bytes()
        assert int.from_bytes(data[:4], "little") == len(data) - 4 and data[8:12] == ETDUMP_ID, data[:16]

    @rule(program=consumes(programs))
    def drop_program(self, program):
        step("del program")
        del program
        self.live_programs -= 1
        self.dropped += 1

    @rule(session=consumes(sessions))
    def drop_session(self, session):
        step("del session")
        del session
        self.dropped += 1

    @rule(method=consumes(methods))
    def drop_method(self, method):
        step("del method")
        del method
        self.dropped += 1

    @precondition(lambda self: self.dropped > 0)
    @rule()
    def collect(self):
        step("gc.collect")
        gc.collect()
        self.dropped = 0

    def teardown(self):
        step("teardown")
        gc.collect()


def main() -> None:
    et_copy.use_simulated_device()
    OUT.mkdir(parents=True, exist_ok=True)
    run_settings = settings(
        max_examples=EXAMPLES,
        stateful_step_count=STEPS,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    run_state_machine_as_test(seed(SEED)(CallOrders), settings=run_settings)
    step("done")


if __name__ == "__main__":
    main()
