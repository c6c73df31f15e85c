# The simulated device's backend's own extension (backends/simulated/bindings/simulated.cpp): it
# links et-copy's shared runtime, and loading it describes SimulatedDeviceBackend.
# Use et_copy.backends.simulated.
from typing import Literal

PAYLOAD_PROGRAM: str

def register_simulated_device_backend() -> Literal["registered", "already et_copy"]: ...
