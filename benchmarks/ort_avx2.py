#!/usr/bin/env python3
"""A copy of the installed ONNX Runtime whose MLAS kernels stop at AVX2, for a
like-for-like comparison of our AVX2 path on an AVX-512 machine.

PyTorch's oneDNN takes `ONEDNN_MAX_CPU_ISA=AVX2`; ONNX Runtime has no such switch: MLAS
(its GEMM, logistic and tanh kernels) reads CPUID once and takes its AVX-512F kernels
when the CPU and the OS support them. This copies the `onnxruntime` package of the
Python running it into DIR and, in the copy's native modules, turns the conditional
jump that skips MLAS's AVX-512F block when CPUID leaf 7 lacks AVX512F into an
unconditional one: MLAS then keeps its FMA3 (AVX2) kernels, exactly what it picks on an
AVX2 machine. The installed package is not touched.

    $PYTHON benchmarks/ort_avx2.py target/ort-avx2
    PYTHONPATH=target/ort-avx2 $PYTHON ../shared/peers/lstm_peers.py --impl onnxruntime ...

It looks for MLAS's test of the AVX512F bit (`test $0x10000, reg32`, then a short `je`,
then the XCR0 test `test $0xe0` on the inverted value) and patches only where it finds
exactly one in a module; otherwise it exits with status 2 and says so (another build of
ONNX Runtime: compare against its native ISA, and say that in the results). Checked on
ONNX Runtime 1.32.0 (x86-64 Linux wheel) with `perf`: the hot loop of the patched
runtime is `vfmadd231ps` on ymm registers, of the original on zmm.
"""
import importlib.util
import pathlib
import re
import shutil
import sys

# test $0x10000, r32 (with or without a REX prefix; `a9` is the eax form), je rel8 to
# past the AVX-512 block, then within a few instructions the XCR0 check
# `not; test $0xe0, al; je` (MLAS's `(xcr0 & 0xE0) == 0xE0`).
AVX512F_SKIP = re.compile(
    rb"(?:\xf7[\xc0-\xc7]|\xa9)\x00\x00\x01\x00(\x74).{0,16}?\xa8\xe0(?:\x74|\x0f\x84)",
    re.S,
)
UNCONDITIONAL_SHORT_JUMP = 0xEB


def patch_module(path: pathlib.Path) -> bool:
    """Patches `path` in place if it holds exactly one MLAS AVX512F test; says so."""
    data = bytearray(path.read_bytes())
    found = list(AVX512F_SKIP.finditer(data))
    if len(found) != 1:
        print(f"{path.name}: {len(found)} MLAS AVX512F tests, left as is", file=sys.stderr)
        return False
    at = found[0].start(1)
    data[at] = UNCONDITIONAL_SHORT_JUMP
    path.write_bytes(data)
    print(f"{path.name}: AVX512F test at file offset {at:#x} now always skips", file=sys.stderr)
    return True


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    spec = importlib.util.find_spec("onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("onnxruntime is not installed for this Python")
    source = pathlib.Path(list(spec.submodule_search_locations)[0])
    target = pathlib.Path(sys.argv[1]) / "onnxruntime"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)
    patched = [m.name for m in sorted((target / "capi").glob("*.so*")) if patch_module(m)]
    # The Python binding is the module `import onnxruntime` runs on.
    if not any(name.startswith("onnxruntime_pybind11_state") for name in patched):
        shutil.rmtree(target)
        print("no MLAS AVX512F test recognised in this ONNX Runtime's binding: not capped",
              file=sys.stderr)
        sys.exit(2)
    print(target.parent)


if __name__ == "__main__":
    main()
