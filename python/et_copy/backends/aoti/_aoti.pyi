# The compiled backend's own extension (backends/aoti/bindings/aoti.cpp): it links et-copy's
# shared runtime, and loading it describes AotiDeviceBackend. Use et_copy.backends.aoti.
from typing import Literal

PAYLOAD_AOTI: str
AOTI_BACKEND_ID: str
AOTI_TORCH_VERSION: str

def register_aoti_backend() -> Literal["registered", "already et_copy"]: ...

# Which compiled code the compiled backend runs (et_copy/code_trust.h). compile_cache_dir: '' when
# the cache is off. trust_compiled_code: for this process; with compiled_here, also marked in the
# compile cache as this machine's. EtCopyError (InvalidArgument) for a digest that is not 64 lowercase hex.
def compile_cache_dir() -> str: ...
def trust_compiled_code(digest: str, compiled_here: bool = False) -> None: ...
def is_trusted_code(digest: str) -> bool: ...
