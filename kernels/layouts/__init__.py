"""Weight layouts, one module each: the host swizzle and its inverse (torch), the 2-D view a
kernel reads, and the kernel's tile pointers, loads and unswizzle (@triton.jit).

cdna4: aiter's preshuffled layout for CDNA4 (B_shuffle, B_scale_sh), the one the op takes;
it imports nothing of the project's, so that kernels.formats can name its host functions too.
hopper: the layout MXFP4Linear prepares once for NVIDIA Hopper's register-fed wgmma
(kernels/hopper_prepared_gemm.py reads it), made from cdna4's or from codes and scales.
"""
