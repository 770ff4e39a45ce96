-- lunet: `luarocks --lua-version=5.1 make` in a checkout builds and installs
-- it (LuaJIT counts as Lua 5.1); tools/ci-extra.sh packs a .src.rock from the
-- committed tree and installs it offline. Debian packages needed to build:
-- gcc make libluajit-5.1-dev libopenblas-dev libdnnl-dev (oneDNN) zlib1g-dev
-- libjpeg62-turbo-dev libpng-dev (lunet.data.read_image's JPEG and PNG decoding)
-- libsleef-dev (SLEEF: the vectorised float32 exp, tanh, erf of the activations)
-- (tools/install-deps.sh); libreadline8 for the REPL's line editing;
-- openmpi-bin libopenmpi-dev for lunet.distributed across processes (the mpi
-- backend's liblunet_mpi.so, built when mpicc is there; optional).
rockspec_format = "3.0"
package = "lunet"
version = "scm-1"
source = {
  -- the upstream repository; tools/ci-extra.sh points this at the local checkout
  url = "git+https://github.com/lunet/lunet.git",
}
description = {
  summary = "Tensors, CNN layers and multi-device training for LuaJIT",
  detailed = [[
A C shared library of tensors, CNN layers and multi-device training,
driven from LuaJIT through FFI: a modern Torch7 that a PyTorch user feels at
home in. Data parallel and pipeline (model parallel) training over several
devices, a planner that chooses between them, and training across processes
with Open MPI. Convolutions run on oneDNN, OpenBLAS or direct kernels.
Includes safetensors I/O and the `lunet` interactive shell.]],
  homepage = "https://github.com/lunet/lunet",
  labels = { "tensor", "deep-learning", "luajit", "ffi" },
}
supported_platforms = { "linux" }
dependencies = {
  "lua == 5.1",   -- LuaJIT
}
-- (checked by luarocks before the build; the Makefile links -ljpeg -lpng -lsleef)
external_dependencies = {
  JPEG = { header = "jpeglib.h", library = "jpeg" },
  PNG = { header = "png.h", library = "png" },
  -- (no header check: Debian keeps sleef.h under /usr/include/<triplet>, where luarocks does not look)
  SLEEF = { library = "sleef" },
}
build = {
  type = "make",
  build_target = "all",
  build_variables = {
    CFLAGS = "$(CFLAGS)",
    CC = "$(CC)",
  },
  install_target = "install",
  install_variables = {
    LUADIR = "$(LUADIR)",
    LIBDIR = "$(LIBDIR)",
    BINDIR = "$(BINDIR)",
    PREFIX = "$(PREFIX)",
  },
}
