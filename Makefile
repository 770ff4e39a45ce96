# lunet -- make: build the library; make test: the specs; make demo: train.
# Flags a caller passes (luarocks passes CFLAGS, CC) go in CFLAGS; what the
# build needs stays in ALL_CFLAGS so a command-line CFLAGS cannot drop it.

BUILD    ?= build
CFLAGS   ?= -O3 -g
LUAJIT   ?= luajit
PREFIX   ?= /usr/local
LUADIR   ?= $(PREFIX)/share/lua/5.1
LIBDIR   ?= $(PREFIX)/lib/lua/5.1
BINDIR   ?= $(PREFIX)/bin

ALL_CFLAGS = $(CFLAGS) -std=gnu11 -fPIC -fopenmp -fvisibility=hidden -Wall -Wextra \
             -Wno-unused-parameter -Wno-missing-field-initializers -Wno-type-limits -Ic/include $(EXTRA_CFLAGS)
LDLIBS     = -lopenblas -ldnnl -ljpeg -lpng -lz -lsleef -lm -lpthread -ldl

SRC  := $(wildcard c/core/*.c c/ops/*.c c/cpu/*.c c/comm/*.c c/data/*.c c/nn/*.c)
OBJ  := $(SRC:%.c=$(BUILD)/obj/%.o)
HDRS := $(wildcard c/include/*.h c/core/*.h c/cpu/*.h c/comm/*.h c/mpi/*.h c/data/*.h c/nn/*.h)
LIB  := $(BUILD)/liblunet.so
CDEF := lua/lunet/cdef.lua
# the specs' declarations of internal hooks (c/include/lunet_internal.h)
CDEF_INTERNAL := lua/lunet/cdef_internal.lua
# the mpi backend's calls into Open MPI (c/mpi/shim.c), dlopen'd by liblunet.so;
# built only where mpicc is (without it everything else builds and works)
MPICC   ?= mpicc
MPI_LIB := $(if $(shell command -v $(MPICC) 2>/dev/null),$(BUILD)/liblunet_mpi.so)

.PHONY: all test test-asan demo bench install deps clean rock gpu-carry
all: $(LIB) $(CDEF) $(CDEF_INTERNAL) $(MPI_LIB)

$(BUILD)/obj/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

# -z nodelete: LuaJIT dlcloses the library at exit while OpenMP workers may still
# run; unloading their code under them crashed some runs at exit (SIGSEGV).
$(LIB): $(OBJ)
	$(CC) $(ALL_CFLAGS) -shared -Wl,-z,nodelete -o $@ $(OBJ) $(LDLIBS) $(EXTRA_LDFLAGS)

$(BUILD)/liblunet_mpi.so: c/mpi/shim.c c/mpi/shim.h
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -std=gnu11 -fPIC -fvisibility=hidden -Wall -Wextra -Wno-unused-parameter \
	   -shared -o $@ c/mpi/shim.c $(EXTRA_LDFLAGS)

# ---- the CUDA backend (c/cuda/): its own library, never linked into liblunet.so;
# core dlopens it beside liblunet.so on the first question about cuda devices.
# Built whenever nvcc is found (CUDA=0 skips it). cudart is linked statically
# (the library needs only the driver and, on first use, cuBLAS from CUDA_HOME).
CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(shell command -v nvcc 2>/dev/null || { test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc; })
CUDA      ?= $(if $(NVCC),1,0)
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
CUDA_LIB  := $(BUILD)/liblunet_cuda.so
CUDA_OBJ  := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard c/cuda/*.c)) $(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(wildcard c/cuda/*.cu))
# (its own flags: a sanitizer build of liblunet.so loads it unsanitized)
CUDA_CFLAGS = -O2 -g -std=gnu11 -fPIC -fvisibility=hidden -Wall -Wextra -Wno-unused-parameter \
              -Wno-missing-field-initializers -Ic/include -I$(CUDA_HOME)/include
ifeq ($(CUDA),1)
all: $(CUDA_LIB)
endif

$(BUILD)/obj/c/cuda/%.o: c/cuda/%.c $(HDRS) $(wildcard c/cuda/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CUDA_CFLAGS) -c $< -o $@

$(BUILD)/obj/c/cuda/%.cu.o: c/cuda/%.cu c/cuda/kern.h c/include/lunet.h c/core/grid_taps.h c/core/philox.h
	@mkdir -p $(dir $@)
	$(NVCC) -O3 -std=c++17 $(CUDA_ARCH) -Xcompiler -fPIC,-fvisibility=hidden -diag-suppress 186 -c $< -o $@

# -z defs: every symbol resolved here (core's come through a table, never by name)
$(CUDA_LIB): $(CUDA_OBJ)
	$(NVCC) -shared $(CUDA_ARCH) -cudart static -o $@ $(CUDA_OBJ) -ldl -lpthread -Xlinker -z,defs \
	  -Xlinker -rpath,$(CUDA_HOME)/lib64:$(CUDA_HOME)/lib:$(CUDA_HOME)/targets/x86_64-linux/lib

# random fills: no FMA contraction (the AVX-512/AVX2/baseline clones and the
# GPU must round alike: c/core/philox.h); sqrt without errno and compares
# that do not trap, so they vectorize
$(BUILD)/obj/c/cpu/random.o: ALL_CFLAGS += -ffp-contract=off -fno-math-errno -fno-trapping-math
# the SLEEF activation kernels (c/cpu/vact.c picks one at run time)
$(BUILD)/obj/c/cpu/vact_avx512.o: ALL_CFLAGS += -mavx512f
$(BUILD)/obj/c/cpu/vact_avx2.o: ALL_CFLAGS += -mavx2 -mfma
# optimizer kernels: sqrt without errno, so their loops vectorize
$(BUILD)/obj/c/cpu/optim.o: ALL_CFLAGS += -fno-math-errno
# batch norm + relu backward: a masked gradient summed in double vectorizes
# only when the compiler may assume float compares do not trap (5x slower without)
$(BUILD)/obj/c/cpu/batchnorm.o: ALL_CFLAGS += -fno-trapping-math

# The FFI declarations are generated from the one public header.
$(CDEF): c/include/lunet.h
	@{ echo '-- generated from c/include/lunet.h by make: do not edit'; echo 'return [==['; \
	   $(CC) -E -P -DLN_CDEF c/include/lunet.h; echo ']==]'; } > $@.tmp && mv $@.tmp $@

$(CDEF_INTERNAL): c/include/lunet_internal.h
	@{ echo '-- generated from c/include/lunet_internal.h by make: do not edit'; echo 'return [==['; \
	   $(CC) -E -P -DLN_CDEF -Ic/include c/include/lunet_internal.h | sed '/^$$/d'; echo ']==]'; } > $@.tmp && mv $@.tmp $@

# What tools/gpu-check.sh needs on a GPU machine beside the work tree (the
# device tool's `carry`: build/gpu-carry); see tools/gpu-check.sh's header.
gpu-carry: all
	@[ -f $(CUDA_LIB) ] || { echo "gpu-carry: $(CUDA_LIB) was not built (no nvcc, or CUDA=0)" >&2; exit 1; }
	@bash tools/gpu-carry.sh $(BUILD) $(BUILD)/gpu-carry

deps:
	@bash tools/install-deps.sh

test: deps
	@$(MAKE) --no-print-directory all
	@bash tools/run-specs.sh

test-asan: deps
	@$(MAKE) --no-print-directory BUILD=build-asan CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer" \
	   EXTRA_LDFLAGS="-fsanitize=address,undefined" all
	@LUNET_LIB=$(CURDIR)/build-asan/liblunet.so LUNET_ASAN=1 bash tools/run-specs.sh

demo: deps
	@$(MAKE) --no-print-directory all
	@bash tools/install-deps.sh demo
	$(LUAJIT) examples/fashion_mnist.lua

bench: deps
	@$(MAKE) --no-print-directory all
	@bash tools/install-deps.sh bench
	@for f in bench/*.lua; do [ $$f = bench/models.lua ] && continue; echo "== $$f"; \
	   LUNET_LIB=$${LUNET_LIB:-$(CURDIR)/$(BUILD)/liblunet.so} \
	   OMP_WAIT_POLICY=$${OMP_WAIT_POLICY:-passive} $(LUAJIT) $$f || exit 1; echo; done
	@echo "== bench/compare_torch"; LUNET_LIB=$${LUNET_LIB:-$(CURDIR)/$(BUILD)/liblunet.so} LUAJIT=$(LUAJIT) bench/compare_torch

install: all
	install -d $(DESTDIR)$(LUADIR)/lunet $(DESTDIR)$(LIBDIR) $(DESTDIR)$(BINDIR)
	@# every module, sub-folders (nn/, optim/, ...) and the generated cdef.lua included
	for f in $$(cd lua && find lunet -name '*.lua'); do \
	  install -D -m 644 lua/$$f $(DESTDIR)$(LUADIR)/$$f || exit 1; done
	install -m 755 $(LIB) $(DESTDIR)$(LIBDIR)/liblunet.so
	$(if $(MPI_LIB),install -m 755 $(MPI_LIB) $(DESTDIR)$(LIBDIR)/liblunet_mpi.so)
	@# the CUDA backend, when built, beside it (core dlopens it from liblunet.so's folder)
	if [ -f $(CUDA_LIB) ]; then install -m 755 $(CUDA_LIB) $(DESTDIR)$(LIBDIR)/liblunet_cuda.so; fi
	install -m 755 bin/lunet $(DESTDIR)$(BINDIR)/lunet

clean:
	rm -rf build build-asan $(CDEF) $(CDEF_INTERNAL)
