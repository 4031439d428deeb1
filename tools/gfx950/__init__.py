"""Everything that makes or reads gfx950 code, with `python -m tools.isa` as its face:
cross_compile compiles a kernel offline with a chosen Triton release; report reads a compiled
call's resources, quantizer cost, hazards, release order and critical path; assembly parses
the amdgcn text (instructions, labels, .loc frames, the K loop); hazards finds the hazards at
the edges of inline asm; release_order checks the in-kernel split-K reduce's ordering;
critical_path walks one wave's path through a kernel; model turns a walked call into modelled
µs through the runner's harness; search ranks the config space by that model. The readers are
pure functions over the text, tested on hand-written snippets."""
