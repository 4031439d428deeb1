#!/usr/bin/env bash
# One round of GPU checks on an NVIDIA (or AMD) machine, each step's log written to a folder:
#   bash tools/gpu_round.sh OUTDIR [STEP ...]      (default: every step, in this order)
# Steps:
#   suite     python -m pytest -q -n $SUITE_WORKERS -rs (pytest-xdist, 8 by default): failures,
#             errors, skips and why
#   shapes    the large-M and odd shapes through custom_kernel, each checked against the
#             reference and timed beside F.linear on the bf16 weight (tools.bench)
#   random    50 random shapes over M 1-16384 and the built-in model layers, each served and
#             checked, with the config and rung that served it (tools.soak)
#   model     one decode step of the Quark fixture model beside its bf16 twin, M 1-256,
#             eager and captured (tools.bench --model)
#   host      host µs per call of F.linear, the op, MXFP4Linear and custom_kernel on the
#             llama-3-8b decode and benchmark shapes (tools.bench --host-only)
#   ranked    the one-file bundle through the runner's whole ranked run (tools.evaluate
#             ranked; its cache clear per timed call is $CLEAR_BYTES, 1 GiB by default, the
#             runner's 62.5 GiB where the card holds it; $MAX_WALL seconds of timed loop a
#             shape, 10 by default)
#   import    a cold `import submission`: empty Triton cache, import-time tuning on
#   fence     (not in the default round) the prepared path past its chip's reach, each part
#             of each shape in a fresh process, wrong outputs described by row, column tile
#             and K split (tools.prepared_check --beyond-reach), then tests/test_prepared.py's
#             every-M cases with the reach lifted the same way
#   prepared  (not in the default round) Llama-3-8B's decode weights through the
#             prepared-weight path (the rule and its variants) beside custom_kernel, F.linear
#             bf16 and the prepared weight's bytes, no tuned configs (tools.bench --prepared):
#             one process and JSON (prepared_mM.json) per M of $PREPARED_M (default 1 8 32 64
#             128), so that a round cut short keeps the Ms it finished
#   large     (not in the default round) the prepared path's large tiles: each part of three
#             large shapes checked (tools.prepared_check), then the prefill shapes through the
#             prepared path and through custom_kernel's paths (the dequant path and the hopper
#             path's large tile) beside F.linear bf16 (tools.bench --prepared, --vendor-gemm),
#             each of the three a step of its own (large_check, large_prepared, large_vendor)
# Each step runs in a process of its own under a time limit (STEP_TIMEOUT_S, default 540),
# and the round goes on after a failed step; the last line of summary.txt names each step's
# exit code. Run it from the repository's root.
set -u -o pipefail
out="${1:?usage: bash tools/gpu_round.sh OUTDIR [STEP ...]}"
shift
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(suite shapes random model host ranked import)
mkdir -p "$out"
export PYTHONUNBUFFERED=1
limit="${STEP_TIMEOUT_S:-540}"
LARGE_CHECK="1024,4096,4096 2048,7168,2048 300,1040,576,strided"
PREFILL_SHAPES="256,4096,4096 512,4096,4096 1024,4096,4096 2048,4096,4096 2048,7168,2048 \
1536,2112,7168 2048,4096,4352 4096,4096,4096 8192,8192,8192 1024,208,512 2048,28672,4096 \
4096,4096,14336"
LARGE_SHAPES="1024,4096,4096 2048,4096,4096 2048,7168,2048 1536,2112,7168 2048,4096,4352 4096,4096,4096 8192,8192,8192 1024,208,512"

run_step() {
    local name="$1"; shift
    local start=$SECONDS
    echo "== $name: $*" | tee -a "$out/summary.txt"
    timeout "$limit" "$@" > "$out/$name.log" 2>&1
    local code=$?
    echo "== $name: exit $code in $((SECONDS - start)) s" | tee -a "$out/summary.txt"
    tail -n 25 "$out/$name.log"
    results+=("$name=$code")
}

results=()
python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__,
'device', torch.cuda.get_device_name() if torch.cuda.is_available() else 'none')" \
    | tee -a "$out/summary.txt"
for step in "${steps[@]}"; do
    case "$step" in
        suite)  run_step suite python -m pytest -q -n "${SUITE_WORKERS:-8}" -rs -p no:cacheprovider ;;
        shapes) run_step shapes python -m tools.bench --calls 20 --shapes $LARGE_SHAPES \
                    --json "$out/shapes.json" ;;
        random) run_step random python -m tools.soak --random-shapes 50 --calls 0 --iterations 0 ;;
        model)  run_step model python -m tools.bench --model tests/data/quark_tiny_llama \
                    --modes eager,captured --json "$out/model.json" ;;
        host)   run_step host python -m tools.bench --host-only --json "$out/host.json" ;;
        ranked) run_step ranked bash -c "python -m tools.bundle && python -m tools.evaluate \
                    ranked --submission dist/submission.py --json '$out/ranked.json' \
                    --clear-bytes ${CLEAR_BYTES:-1073741824} --max-wall ${MAX_WALL:-10}" ;;
        import) run_step import env TRITON_CACHE_DIR="$(mktemp -d)" MXFP4_MM_TUNE=1 python -c "
import subprocess, sys, time
start = time.perf_counter()
code = subprocess.call([sys.executable, '-c', 'import submission'])
print(f'cold import submission: {time.perf_counter() - start:.1f} s, exit {code}')
sys.exit(code)" ;;
        fence)  run_step fence bash -c "python -m tools.prepared_check --beyond-reach \
                    9,128,1024 8,6144,4096 64,4096,14336 16,4096,4096 128,4096,4096 \
                    20,80,576,strided 1,4096,4096; MXFP4_MM_PREPARED_BEYOND_REACH=1 python -m \
                    pytest -q -n \"${SUITE_WORKERS:-8}\" -rf tests/test_prepared.py" ;;
        prepared) for m in ${PREPARED_M:-1 8 32 64 128}; do
                    run_step "prepared_m$m" env -u MXFP4_MM_CONFIGS MXFP4_MM_TUNE=0 python -m \
                        tools.bench --prepared --shapes llama-3-8b --m "$m" \
                        --json "$out/prepared_m$m.json"
                  done ;;
        large)  run_step large_check python -m tools.prepared_check $LARGE_CHECK
                run_step large_prepared env MXFP4_MM_TUNE=0 python -m tools.bench --prepared \
                    --calls 20 --shapes $PREFILL_SHAPES --json "$out/large.json"
                run_step large_vendor env MXFP4_MM_TUNE=0 python -m tools.bench --vendor-gemm \
                    --calls 20 --shapes $PREFILL_SHAPES --json "$out/vendor.json" ;;
        *) echo "gpu_round: unknown step $step" | tee -a "$out/summary.txt"; results+=("$step=2") ;;
    esac
done
echo "steps: ${results[*]}" | tee -a "$out/summary.txt"
