# Sourced: gpu_count prints the number of visible NVIDIA GPUs (0 without a driver or nvidia-smi).
gpu_count() {
  if command -v nvidia-smi > /dev/null 2>&1; then
    nvidia-smi -L 2> /dev/null | grep -c '^GPU ' || true
  else
    echo 0
  fi
}
