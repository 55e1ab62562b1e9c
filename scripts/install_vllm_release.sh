#!/usr/bin/env bash
# Install one vLLM release's Python code for the per-release golden harnesses, on a CPU, cheaply:
# the release wheel without its dependencies, the CPU torch 2.13 wheel this machine carries, and
# the release's own requirements less the GPU stacks (torch builds, FlashInfer, NVIDIA/CUDA
# libraries, Triton, xformers, kernels packages), which the KV-cache planning code never imports.
#
#     bash scripts/install_vllm_release.sh 0.19.0        # -> ~/.cache/vllm-0.19.0-venv
#
# VLLM_RELEASE_VENV overrides the target. The full install (../shared/tools/vllm-oracle/setup.sh)
# is ~9 GB; this is ~1 GB. The venv's interpreter runs scripts/golden_vllm_release.py --worker.
set -euo pipefail
version="$1"
venv="${VLLM_RELEASE_VENV:-$HOME/.cache/vllm-$version-venv}"
wheels="${VLLM_WHEEL_DIR:-$HOME/.cache/vllm-wheels}"
mkdir -p "$wheels"
python3 -m venv "$venv"
pip="$venv/bin/pip"
"$pip" install -q -U pip 2>&1 | grep -v '^WARNING: Location' || true
ls "$wheels"/vllm-"$version"-*.whl >/dev/null 2>&1 || "$pip" download -q --no-deps "vllm==$version" -d "$wheels" 2>&1 | grep -v '^WARNING: Location' || true
wheel=$(ls "$wheels"/vllm-"$version"-*.whl | head -1)
cpu_torch=$(ls /opt/wheels/torch-2.13.0+cpu-*.whl 2>/dev/null | head -1 || true)
"$pip" install -q "${cpu_torch:-torch==2.13.0}" 2>&1 | grep -v '^WARNING: Location' || true
"$pip" install -q --no-deps "$wheel" 2>&1 | grep -v '^WARNING: Location' || true
# the release's requirements (no extras), less the GPU stacks
reqs=$(unzip -p "$wheel" "vllm-$version.dist-info/METADATA" | sed -n 's/^Requires-Dist: //p' | grep -v 'extra ==' |
       grep -viE '^(torch|torchaudio|torchvision|xformers|flashinfer|nvidia-|triton|cupy|ray|quack-kernels|humming|tokenspeed|tilelang|cuda-|apache-tvm|nccl|deep[-_]|fastsafetensors|instanttensor|pynvvideocodec|torch[-_]c)' |
       sed 's/ *;/;/')
echo "$reqs" > "$venv/requirements-cpu.txt"  # environment markers kept: pip evaluates them
"$pip" install -q -r "$venv/requirements-cpu.txt" 2>&1 | grep -v '^WARNING: Location' || true
# FlashInfer's Python package at the release's pin, without its GPU stacks, and the NVML binding its
# import asks: vLLM's FlashInfer attention backend then imports on the CPU, so the harness asks it its
# kernel block sizes (hybrid page alignment) instead of assuming them
fi_pin=$(unzip -p "$wheel" "vllm-$version.dist-info/METADATA" | sed -n 's/^Requires-Dist: \(flashinfer-python==[^ ;]*\).*/\1/p' | head -1)
if [ -n "$fi_pin" ]; then
  "$pip" install -q --no-deps "$fi_pin" nvidia-ml-py 2>&1 | grep -v '^WARNING: Location' || true
fi
"$venv/bin/python" -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__, 'in', '$venv')"
