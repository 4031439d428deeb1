"""Readers of gfx950 assembly (the amdgcn text Triton writes): pure functions over the text,
used by tools.isa and tested on hand-written snippets."""
