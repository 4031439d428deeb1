"""Readers of gfx950 assembly (the amdgcn text Triton writes): pure functions over the text,
used by tools.isa and tested on hand-written snippets. assembly parses it (instructions,
labels, .loc frames, the K loop); hazards finds the hazards at the edges of inline asm;
critical_path walks one wave's path through the kernel."""
