"""et-copy's tools, apart from the library: the parity harness
(``python -m et_copy parity``), the benchmarks (``bench``), the demo and the
doctor, and the tiny modules that tests, benchmarks and examples export
(:mod:`et_copy.tools.models`). Nothing in the library imports this
package: a program runs with ``et_copy``, ``et_copy.runtime``,
``et_copy.export`` and ``et_copy.llm`` alone."""
