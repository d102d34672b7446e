#!/usr/bin/env bash
# Installs the Debian packages a gotron target needs, when they are missing.
#   scripts/deps.sh blas     OpenBLAS headers and library (cgo GEMM)
#   scripts/deps.sh dnnl     oneDNN headers and library (cgo bf16 GEMM, tensor/dnnl)
#   scripts/deps.sh mpi      Open MPI (the comm/mpi backend and its tests)
#   scripts/deps.sh torch    PyTorch and regex (regenerating the reference fixtures)
#   scripts/deps.sh torchbench  PyTorch at its best for scripts/bench-torch.sh: the
#                            OpenMP build of OpenBLAS and jemalloc, preloaded there
# As root it runs apt-get; otherwise it prints the exact command and fails.
set -euo pipefail

need=()
for what in "$@"; do
  case "$what" in
    blas)  [ -f /usr/include/x86_64-linux-gnu/cblas.h ] || [ -f /usr/include/cblas.h ] || need+=(libopenblas-dev) ;;
    dnnl)  [ -f /usr/include/oneapi/dnnl/dnnl.h ] || need+=(libdnnl-dev) ;;
    mpi)   command -v mpirun >/dev/null 2>&1 && pkg-config --exists ompi-c 2>/dev/null || need+=(openmpi-bin libopenmpi-dev pkg-config) ;;
    torch)
      /usr/bin/python3 -c 'import torch' >/dev/null 2>&1 || need+=(python3-torch)
      /usr/bin/python3 -c 'import regex' >/dev/null 2>&1 || need+=(python3-regex) ;;
    torchbench)
      /usr/bin/python3 -c 'import torch' >/dev/null 2>&1 || need+=(python3-torch)
      [ -f /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0 ] || need+=(libopenblas0-openmp)
      [ -f /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ] || need+=(libjemalloc2) ;;
    *) echo "scripts/deps.sh: unknown component '$what' (blas, dnnl, mpi, torch, torchbench)" >&2; exit 2 ;;
  esac
done
[ ${#need[@]} -eq 0 ] && exit 0

cmd="apt-get install -y --no-install-recommends ${need[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "gotron needs the Debian packages: ${need[*]}" >&2
  echo "install them with:  sudo apt-get update && sudo $cmd" >&2
  exit 1
fi
echo "gotron: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
$cmd >/dev/null
