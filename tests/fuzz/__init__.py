"""Fuzzing of the whole path (open → inspect → build_graph → convert → write).

* ``mutations.py`` — valid seed packages and the byte-, zip-structure- and JSON-value-level
  mutations applied to them, driven by any source of choices (hypothesis or atheris);
* ``oracle.py`` — runs one mutated package through the pipeline and checks the property:
  success or a typed ``engine.PT2Error`` — no other exception, no hang, no memory blow-up;
* ``test_fuzz_pipeline.py`` — the bounded hypothesis fuzz of the default test run;
* ``test_crashers.py`` + ``crashers/`` — every input a fuzzer broke the engine with, kept;
* ``atheris_pt2.py`` — a coverage-guided harness, run by hand (see its docstring).
"""
