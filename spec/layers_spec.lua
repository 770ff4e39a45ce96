-- The layers of c/ (c/README.md): tools/check-layers.sh checks the include
-- rules on the sources (only c/cpu/ includes c/cpu/, ...) and, with nm on the
-- objects make built, that c/core calls nothing defined in c/ops, c/nn,
-- c/cpu, c/comm or c/data. Run here so
-- that a breach fails `make test` (and so CI).
local shell = require 'shell'
local root, sh, readfile = shell.root, shell.sh, shell.readfile


-- the build folder of the library under test (build-asan for make test-asan)
local lib = os.getenv('LUNET_LIB')
local build = lib and lib:match('^(.*)/liblunet%.so$') or (root .. 'build')

describe('layers (tools/check-layers.sh)', function()
  it('holds for the tree and the built objects', function()
    local out, rc = sh(('bash %stools/check-layers.sh %q'):format(root, build))
    assert.equal(0, rc, out)
    assert.truthy(out:find('check-layers: ok', 1, true), out)
  end)

  it('fails on each kind of breach (a copy of c/ with seven added)', function()
    local tmp = os.tmpname(); os.remove(tmp)
    assert.equal(0, select(2, sh(('mkdir -p %q/tools %q/build/obj/c/core && cp -r %sc %q/ && cp %stools/check-layers.sh %q/tools/ && cp -r %q/obj %q/build/')
      :format(tmp, tmp, root, tmp, root, tmp, build, tmp))))
    assert.equal(0, select(2, sh(table.concat({
      ('echo "#include <cblas.h>" >> %q/c/ops/linalg.c'):format(tmp),
      ('echo "#include \\"../nn/nn.h\\"" >> %q/c/core/tensor.c'):format(tmp),
      ('echo "#include \\"../cpu/cpu.h\\"" >> %q/c/nn/pool.c'):format(tmp),
      ('echo "#include \\"../cpu/iter.h\\"" >> %q/c/comm/local.c'):format(tmp),
      ('echo "#include \\"../cpu/cpu.h\\"" >> %q/c/data/batch.c'):format(tmp),
      ('printf "int ln_copy_(void *, void *);\\nint f(void) { return ln_copy_(0, 0); }\\n" > %q/m.c'):format(tmp),
      ('cc -c %q/m.c -o %q/build/obj/c/core/zz_breach.o'):format(tmp, tmp),
      ('printf "void ln_parallel_for(long, long, void *, void *);\\nvoid g(void) { ln_parallel_for(1, 1, 0, 0); }\\n" > %q/d.c'):format(tmp),
      ('cc -c %q/d.c -o %q/build/obj/c/data/zz_breach.o'):format(tmp, tmp)}, ' && '))))
    local out, rc = sh(('bash %q/tools/check-layers.sh %q/build'):format(tmp, tmp))
    sh(('rm -rf %q'):format(tmp))
    assert.equal(1, rc, out)
    assert.truthy(out:find('c/ops/linalg.c:%d+ includes <cblas.h>'), out)
    assert.truthy(out:find('c/core/tensor.c:%d+ includes c/nn/nn.h'), out)
    assert.truthy(out:find('c/nn/pool.c:%d+ includes c/cpu/cpu.h'), out)
    assert.truthy(out:find('c/comm/local.c:%d+ includes c/cpu/iter.h: only c/cpu/ includes c/cpu/'), out)
    assert.truthy(out:find('c/data/batch.c:%d+ includes c/cpu/cpu.h: only c/cpu/ includes c/cpu/'), out)
    assert.truthy(out:find('c/core/zz_breach.o references ln_copy_', 1, true), out)
    assert.truthy(out:find('c/data/zz_breach.o references ln_parallel_for, which c/cpu/ defines', 1, true), out)
  end)
end)
