#!/usr/bin/env bash
# Installs the Debian packages lunet needs, when missing. Usage:
#   tools/install-deps.sh          build + test dependencies
#   tools/install-deps.sh demo     + the Fashion-MNIST data set
#   tools/install-deps.sh bench    + PyTorch for side-by-side figures
set -e
# the specs read the real Fashion-MNIST files and check interop with numpy
pkgs="gcc make openmpi-bin libopenmpi-dev luajit libluajit-5.1-dev lua-busted luarocks libopenblas-dev libdnnl-dev zlib1g-dev libjpeg62-turbo-dev libpng-dev libsleef-dev libreadline8 python3 python3-numpy dataset-fashion-mnist"
case "${1:-}" in
  demo) pkgs="dataset-fashion-mnist" ;;
  bench) pkgs="python3-torch python3-numpy" ;;
  fixtures) pkgs="python3-torch python3-numpy python3-pil python3-torchvision python3-onnx" ;;   # (python3-onnx: onnx_spec runs onnx.checker)
  reliability) pkgs="clang libfuzzer-14-dev valgrind" ;;   # tools/ci-reliability.sh
esac
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "lunet: installing missing Debian packages:$missing"
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO=sudo
  else echo "lunet: please run as root, or: sudo apt-get install -y$missing" >&2; exit 1; fi
fi
export DEBIAN_FRONTEND=noninteractive
${SUDO:-} apt-get update -q >/dev/null || true
${SUDO:-} apt-get install -y -q -o DPkg::Lock::Timeout=600 $missing >/dev/null
