"""Everything that makes or reads gfx950 code, with `python -m tools.isa` as its face:
cross_compile compiles a kernel offline with a chosen Triton release; report reads a compiled
call's resources, quantizer cost, hazards, release order and critical path; assembly parses
the amdgcn text (instructions, labels, .loc frames, the K loop); hazards finds the hazards at
the edges of inline asm; release_order checks the in-kernel split-K reduce's ordering;
critical_path walks one wave's path through a kernel, in events and in cycles; model turns a
walked call into modelled µs through the runner's harness under each member of a family of
models; calibration writes the walked figures of the public points' kernels into the model's
data; search ranks the config space by the family's worst case; mfma counts the MFMA clocks
and paths compares the fused GEMM with A quantized once, per shape. The readers are pure
functions over the text, tested on hand-written snippets."""
