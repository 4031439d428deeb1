"""The Triton kernels, one a file, and the layout math (formats): mxfp4_mm.kernels."""

if __name__ == "kernels":   # found under its own name: the checkout's root is on sys.path
    from mxfp4_mm import step_aside
    step_aside(__name__)
