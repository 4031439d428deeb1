"""Compile a Triton kernel for a GPU this machine does not have (gfx950, sm_90), offline.

`compile_for(kernel, args, options, target)` takes the same full argument tuple that the
launchers pass (tensors may live on the "meta" device) and specializes it the way the JIT
does: constexpr parameters and integers equal to 1 become constants, 16-aligned pointers
and integers divisible by 16 get the divisibility hint. The result is a CompiledKernel whose
`asm` holds the target's assembly (e.g. asm["amdgcn"]) and `metadata` its resources.
`kernel` must be a JITFunction: compile outside the interpreter (TRITON_INTERPRET unset).
"""

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

GFX950 = GPUTarget("hip", "gfx950", 64)
SM90 = GPUTarget("cuda", 90, 32)

_POINTER_TYPES = {torch.bfloat16: "*bf16", torch.float32: "*fp32", torch.uint8: "*u8",
                  torch.float16: "*fp16", torch.int32: "*i32"}


def compile_for(kernel, args, options, target=GFX950):
    signature, constexprs, attrs = {}, {}, {}
    constexpr_indices = set(kernel.constexprs)
    for index, (name, value) in enumerate(zip(kernel.arg_names, args)):
        if index in constexpr_indices or value is None or isinstance(value, bool):
            signature[name] = "constexpr"
            constexprs[name] = value
        elif isinstance(value, torch.Tensor):
            signature[name] = _POINTER_TYPES[value.dtype]
            attrs[(index,)] = [["tt.divisibility", 16]]
        elif isinstance(value, int):
            if value == 1:
                signature[name] = "constexpr"
                constexprs[name] = 1
            else:
                signature[name] = "i32"
                if value % 16 == 0:
                    attrs[(index,)] = [["tt.divisibility", 16]]
        else:
            raise TypeError(f"cannot specialize argument {name}={value!r}")
    source = ASTSource(kernel, signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(source, target=target, options=options)
