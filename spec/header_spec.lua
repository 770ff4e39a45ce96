-- lunet.h as the manual (issue 17, item 6): it opens with a worked example
-- that is examples/c/tiny.c, which builds against the library and runs (a
-- convolution trained a few SGD steps, a wrong call reported by
-- ln_last_error); the specs' and benches' hooks are in lunet_internal.h, not
-- in the public header nor in the cdef Lua loads by default.
local shell = require 'shell'
local root, sh, readfile = shell.root, shell.sh, shell.readfile


local lib = os.getenv('LUNET_LIB') or (root .. 'build/liblunet.so')
local header = readfile(root .. 'c/include/lunet.h')
local example = readfile(root .. 'examples/c/tiny.c')

describe('lunet.h', function()
  it("opens with examples/c/tiny.c's program", function()
    local block = header:match('%-o tiny\n %*\n(.-)\n %*\n %* This is the only declaration')
    assert.truthy(block, 'no example block at the top of lunet.h')
    local lines = {}
    for l in (block .. '\n'):gmatch('(.-)\n') do
      assert.truthy(l == ' *' or l:sub(1, 3) == ' * ', 'not a comment line: ' .. l)
      lines[#lines + 1] = l:sub(4)
    end
    local code = example:sub((assert(example:find('#include <stdio.h>', 1, true))))
    assert.equal(code, table.concat(lines, '\n') .. '\n')
  end)

  it('example builds against the library and runs: the loss falls, a wrong call is named', function()
    local exe = os.tmpname()
    local san = os.getenv('LUNET_ASAN') and ' -fsanitize=address,undefined' or ''
    local dir = lib:match('^(.*)/[^/]*$')
    local out, rc = sh(('cc -std=gnu11 -Wall -Wextra -Werror%s -I%sc/include %sexamples/c/tiny.c %q -Wl,-rpath,%q -o %q')
      :format(san, root, root, lib, dir, exe))
    assert.equal(0, rc, out)
    out, rc = sh(('%q'):format(exe))
    os.remove(exe)
    assert.equal(0, rc, out)
    local a, b = out:match('loss ([%d.]+) %-> ([%d.]+)')
    assert.truthy(a and tonumber(b) < tonumber(a), out)
    assert.truthy(out:find('error: conv2d: ', 1, true), out)
  end)

  it('declares no test hooks or bench references; lunet_internal.h does', function()
    local internal = readfile(root .. 'c/include/lunet_internal.h')
    local cdef = require 'lunet.cdef'
    for _, name in ipairs({ 'ln_stream_inject_error', 'ln_stream_inject_gate', 'ln_stream_inject_opener',
      'ln_cblas_sgemm_direct', 'ln_test_rec_register', 'ln_test_rec_stats' }) do
      assert.falsy(header:find(name, 1, true), name .. ' in lunet.h')
      assert.falsy(cdef:find(name, 1, true), name .. ' in cdef.lua')
      assert.truthy(internal:find(name .. '(', 1, true), name .. ' not in lunet_internal.h')
    end
  end)
end)
