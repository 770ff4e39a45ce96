-- The README as a newcomer follows it: its commands and code blocks run as
-- written, each in a child process with a clean environment (env -i: no
-- LUA_PATH, no LUNET_LIB, no OMP_* settings) from a copy of the checkout that
-- holds what `make` built, as a fresh clone after `make` would. Every command
-- the README shows is either run here or listed in NOT_RUN with the reason.
local shell = require 'shell'
local root, sh, readfile = shell.root, shell.sh, shell.readfile

local function writefile(path, s)
  local f = assert(io.open(path, 'wb'))
  f:write(s); f:close()
end
local function squash(s) return (s:gsub('[ \t]+', ' ')) end

local readme = readfile(root .. 'README.md')

-- fenced blocks: {lang, code, section}
local blocks = {}
do
  local section = ''
  local lang, buf
  for line in (readme .. '\n'):gmatch('(.-)\n') do
    if buf then
      if line:match('^```') then blocks[#blocks + 1] = { lang = lang, code = table.concat(buf, '\n') .. '\n', section = section }; buf = nil
      else buf[#buf + 1] = line end
    else
      section = line:match('^## (.*)') or section
      local l = line:match('^```(%S*)')
      if l then lang, buf = l, {} end
    end
  end
end
local function block(section, lang)
  for _, b in ipairs(blocks) do if b.section == section and b.lang == lang then return b.code end end
  error('README: no ' .. lang .. ' block in section ' .. section)
end

-- prose without the fenced blocks
local prose = readme:gsub('\n```.-\n```', '\n')

-- The commands the README shows: its sh blocks' lines and the inline spans
-- that start with a command (VAR=value prefixes included).
local function is_command(s)
  local c = s:gsub('^%u[%u%d_]*=%S+%s+', '')
  if c == s and s:match('^%u[%u%d_]*=') then return false end   -- a variable's description
  return c:match('^luajit ') or c:match('^make$') or c:match('^make ') or c:match('^luarocks ')
    or c:match('^bin/lunet') or c:match('^lunet$') or c:match('^lunet ') ~= nil
end
local commands = {}
for _, b in ipairs(blocks) do
  if b.lang == 'sh' then
    for line in b.code:gmatch('[^\n]+') do commands[#commands + 1] = (line:gsub('%s*#.*$', '')) end
  end
end
for span in prose:gmatch('`([^`\n]+)`') do
  if is_command(span) then commands[#commands + 1] = span end
end

local RUN = {   -- run by the tests below, as written
  ['luajit script.lua'] = 'the tour, as script.lua in the root',
  ['bin/lunet'] = 'the tour typed into the REPL',
  ['LUNET_CPU_DEVICES=2 luajit examples/seed_cnn.lua'] = 'the Training example on two devices',
}
local NOT_RUN = {   -- and why
  ['make demo'] = 'trains for minutes: its recipe is checked and its script runs here with --smoke',
  ['make test'] = 'runs every spec, this one included (tools/land.sh and CI run it)',
  ['make'] = 'the copy holds what it built (build/liblunet.so, lua/lunet/cdef.lua)',
  ['make bench'] = 'minutes of benchmarks (bench/RESULTS.md)',
  ['make install'] = 'writes under /usr/local; tools/ci-extra.sh installs into a prefix and runs it',
  ['make test-asan'] = 'the specs under ASan (CI)',
  ['luarocks --lua-version=5.1 make'] = 'installs system-wide; tools/ci-extra.sh packs and installs the rock',
  ['lunet'] = 'the installed REPL: bin/lunet is run here',
  ['luajit -jp'] = "LuaJIT's profiler flag, named in passing",
  ['OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 luajit train.lua'] =
    'spec/mpi_spec.lua runs it as written, train.lua being the Processes section\'s Lua block',
  ['mpirun -np 4 luajit train.lua'] = 'needs 4 cores (Open MPI refuses more processes than cores): spec/mpi_spec.lua runs 2',
  ['mpirun --allow-run-as-root -np 4 luajit train.lua'] = 'needs 4 cores; spec/mpi_spec.lua launches as root the same way',
  ['mpirun --oversubscribe -np 8 luajit train.lua'] = 'eight processes: spec/mpi_spec.lua oversubscribes with 3',
  ['mpirun --bind-to none -np 2 luajit train.lua'] = 'spec/mpi_spec.lua launches with --bind-to none',
  ['mpirun -np 4 -H a:2,b:2 luajit train.lua'] = 'needs two hosts named a and b (tools/ci-two-hosts.sh plays two hosts)',
  ['srun -n 4 luajit train.lua'] = 'needs Slurm',
  ['mpirun --allow-run-as-root --bind-to none -np 2 luajit examples/distributed.lua'] =
    'tools/ci-examples.sh runs it with --smoke; the accuracy runs are in bench/RESULTS.md',
  ['mpirun --allow-run-as-root --bind-to none -np 2 luajit examples/distributed.lua --full'] =
    'trains 4 epochs (minutes): bench/RESULTS.md has its accuracy',
  ['luajit examples/distributed.lua --full'] = 'trains 4 epochs (minutes): bench/RESULTS.md has its accuracy',
  ['luajit train.lua'] = 'the Processes block, run as a script as written (a world of one) below',
  ['mpirun --allow-run-as-root --bind-to none -np 2 luajit pipe.lua'] =
    'spec/dpipe_mpi_spec.lua runs it as written, pipe.lua being the Pipelines section\'s second Lua block',
  ['/usr/bin/python3 -c "import torch, torchvision; torch.save(torchvision.models.resnet18(weights=\'DEFAULT\').state_dict(), \'resnet18.pth\')"'] =
    'downloads torchvision\'s weights (nothing here reaches the network)',
  ['luajit examples/finetune.lua --data hymenoptera_data --weights resnet18.pth --epochs 25 --out ants_bees.safetensors'] =
    'needs the tutorial\'s images and torchvision\'s weights: spec/examples_finetune_spec.lua runs its --smoke',
  ['luajit examples/finetune.lua --data hymenoptera_data --weights resnet18.pth --freeze --onnx ants_bees.onnx'] =
    'needs the tutorial\'s images and torchvision\'s weights: spec/examples_finetune_spec.lua runs --smoke --freeze',
  ['luajit examples/finetune.lua --data hymenoptera_data --arch resnet34 --trivialaugment --schedule cosine'] =
    'needs the tutorial\'s images: spec/examples_finetune_spec.lua runs --smoke --trivialaugment --schedule cosine',
  ['luajit examples/finetune.lua --data hymenoptera_data --arch mobilenet_v3_small --weights mobilenet_v3_small.pth --freeze'] =
    'needs the tutorial\'s images and torchvision\'s weights: spec/examples_finetune_spec.lua runs --smoke --freeze --arch mobilenet_v3_small',
  ['luajit examples/finetune.lua --smoke'] = 'spec/examples_finetune_spec.lua runs it (and tools/ci-examples.sh)',
  ['luajit pipe.lua'] = 'the Pipelines across processes block, run as a script as written (a world of one) below',
}

-- ---- the copy of the checkout -------------------------------------------------------

local copy, home
local lib = os.getenv('LUNET_LIB')
if not lib or lib == '' then lib = root .. 'build/liblunet.so' end
local preload = ''
if os.getenv('LUNET_ASAN') then   -- an ASan build needs its runtime preloaded
  preload = ('LD_PRELOAD=%q ASAN_OPTIONS=%q UBSAN_OPTIONS=%q'):format(os.getenv('LD_PRELOAD') or '',
    os.getenv('ASAN_OPTIONS') or '', os.getenv('UBSAN_OPTIONS') or '')
end

-- cmd run in the copy's root with nothing in the environment but PATH and HOME
local function clean(cmd, stdin)
  local input = ''
  if stdin then writefile(home .. '/stdin.txt', stdin); input = ' < ' .. home .. '/stdin.txt' end
  return sh(('cd %q && env -i PATH=/usr/bin:/bin HOME=%q %s %s%s'):format(copy, home, preload, cmd, input))
end

-- every `--> text` comment of a code block is in what it printed
local function check_arrows(code, out, what)
  local n = 0
  for want in code:gmatch('%-%->%s*([^\n]-)%s*\n') do
    n = n + 1
    assert.truthy(squash(out):find(squash(want), 1, true), ('%s: expected %q in:\n%s'):format(what, want, out))
  end
  return n
end

setup(function()
  copy = os.tmpname(); os.remove(copy)
  home = copy .. '-home'
  assert(os.execute(('mkdir -p %q %q/build %q'):format(copy, copy, home)) == 0)
  -- the checkout's files as git knows them (tracked, and new ones not ignored);
  -- outside a git checkout (a source tarball), its files less what the build made
  local out, rc
  if select(2, sh(('git -C %q rev-parse --is-inside-work-tree'):format(root))) == 0 then
    out, rc = sh(('cd %q && git ls-files -z -co --exclude-standard | xargs -0 tar cf - --ignore-failed-read 2>/dev/null | tar xf - -C %q')
      :format(root, copy))
  else
    out, rc = sh(("cd %q && tar cf - --exclude='./build*' --exclude=./lua/lunet/cdef.lua . | tar xf - -C %q"):format(root, copy))
  end
  assert.equal(0, rc, out)
  assert.truthy(io.open(copy .. '/lunet.lua'), 'lunet.lua is not in the checkout')
  -- and what `make` built
  assert.equal(0, select(2, sh(('cp %q %q/build/liblunet.so && cp %q %q/lua/lunet/cdef.lua'):format(
    lib, copy, root .. 'lua/lunet/cdef.lua', copy))))
end)

teardown(function()
  if copy then os.execute(('rm -rf %q %q'):format(copy, home)) end
end)

describe('README', function()
  it('shows only commands this spec runs or names as not run', function()
    assert.truthy(#commands >= 8, table.concat(commands, ' | '))
    for _, c in ipairs(commands) do
      assert.truthy(RUN[c] or NOT_RUN[c], 'README command not covered by spec/readme_spec.lua: ' .. c)
    end
    for c in pairs(RUN) do
      local found = false
      for _, d in ipairs(commands) do found = found or d == c end
      assert.truthy(found, 'README no longer shows ' .. c)
    end
  end)

  it('tour runs as `luajit script.lua` from the repository root, printing what its --> comments say', function()
    local code = block('A short tour', 'lua')
    writefile(copy .. '/script.lua', code)
    local out, rc = clean('luajit script.lua')
    assert.equal(0, rc, out)
    assert.equal(4, check_arrows(code, out, 'luajit script.lua'))
  end)

  it('tour typed line by line into bin/lunet prints the same', function()
    local code = block('A short tour', 'lua')
    local out, rc = clean('bin/lunet', code)
    assert.equal(0, rc, out)
    assert.equal(4, check_arrows(code, out, 'bin/lunet'))
    -- no line failed (the one error the tour prints names its line, stdin:N:)
    for line in out:gmatch('[^\n]+') do
      assert.truthy(not line:find('stdin:', 1, true) or line:find('cannot broadcast', 1, true), out)
    end
    assert.is_nil(out:find('attempt to', 1, true), out)
  end)

  it('Training block is examples/seed_cnn.lua, which gives the same losses on two devices', function()
    local code = block('Training', 'lua')
    local file = readfile(copy .. '/examples/seed_cnn.lua'):gsub('^%-%-[^\n]*\n', ''):gsub('^%-%-[^\n]*\n', '')
    while file:match('^%-%-') do file = file:gsub('^%-%-[^\n]*\n', '') end
    assert.equal(code, file)
    local one, rc1 = clean('luajit examples/seed_cnn.lua')
    assert.equal(0, rc1, one)
    assert.truthy(one:find('Epoch 10, Loss: %d%.%d%d%d%d\n$'), one)
    local two, rc2 = clean('LUNET_CPU_DEVICES=2 luajit examples/seed_cnn.lua')
    assert.equal(0, rc2, two)
    assert.equal(one, two)
  end)

  it('every other Lua block runs as a script as written', function()
    local n = 0
    for i, b in ipairs(blocks) do
      if b.lang == 'lua' and b.section ~= 'A short tour' and b.section ~= 'Training' then
        n = n + 1
        local name = ('block%d.lua'):format(i)
        writefile(copy .. '/' .. name, b.code)
        local out, rc = clean('luajit ' .. name)
        assert.equal(0, rc, b.section .. ': ' .. out)
        assert.truthy(check_arrows(b.code, out, b.section) > 0, b.section .. ': no --> to check')
      end
    end
    assert.truthy(n >= 1)
    for _, b in ipairs(blocks) do   -- no block in another language slips past
      assert.truthy(b.lang == 'lua' or b.lang == 'sh' or b.lang == '', 'README block in ' .. b.lang)
    end
  end)

  it('Coming from PyTorch: every lunet cell of the table runs', function()
    local table_text = readme:match('## Coming from PyTorch\n(.-)\n## ')
    local cells = {}
    for row in table_text:gmatch('\n(|[^\n]+)') do
      local lunet_col = row:match('^|[^|]*|([^|]*)|')
      if lunet_col and not lunet_col:match('^%s*lunet%s*$') and not lunet_col:match('^%-+$') then
        for span in lunet_col:gmatch('`([^`]+)`') do cells[#cells + 1] = span end
      end
    end
    assert.truthy(#cells >= 25, #cells)
    local script = { [[
local lunet = require 'lunet'
local nn = lunet.nn
local env = setmetatable({ lunet = lunet, nn = nn, x = lunet.randn(2, 3), model = nn.Linear(3, 2),
  loader = lunet.data.DataLoader(lunet.data.Synthetic { n = 8, shape = {3}, classes = 2 }, { batch_size = 4 }),
  ds = lunet.data.Synthetic { n = 8, shape = {3}, classes = 2 } }, { __index = _G })
local cells = {]] }
    for _, c in ipairs(cells) do script[#script + 1] = ('  %q,'):format(c) end
    script[#script + 1] = [[
}
for _, c in ipairs(cells) do
  local f = loadstring('return ' .. c) or assert(loadstring(c))
  setfenv(f, env)
  local ok, err = pcall(f)
  if not ok then print('FAILED: ' .. c .. ': ' .. tostring(err)) end
end
print('x:size() = ' .. tostring(env.x:size()))
print('cells done')]]
    writefile(copy .. '/pytorch_table.lua', table.concat(script, '\n'))
    local out, rc = clean('luajit pytorch_table.lua')
    assert.equal(0, rc, out)
    assert.is_nil(out:find('FAILED', 1, true), out)
    assert.truthy(out:find('x:size() = {2, 3}\ncells done\n', 1, true), out)
  end)

  it('make demo runs examples/fashion_mnist.lua, which runs from a clean environment (--smoke)', function()
    local recipe = readfile(copy .. '/Makefile'):match('\ndemo:[^\n]*\n(.-)\n\n')
    assert.truthy(recipe and recipe:find('$(LUAJIT) examples/fashion_mnist.lua', 1, true), recipe)
    local f = io.open('/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz')
    if not f then pending('dataset-fashion-mnist is not installed'); return end
    f:close()
    local out, rc = clean('luajit examples/fashion_mnist.lua --smoke')
    assert.equal(0, rc, out)
    assert.truthy(out:find('test accuracy: %d'), out)
  end)
end)

describe('rockspec', function()
  it('promises nothing not built and names every build dependency', function()
    local spec = readfile(root .. 'lunet-scm-1.rockspec')
    local detailed = spec:match('detailed = %[%[(.-)%]%]')
    -- each capability it names is a module that loads
    local promised = { ['pipeline'] = 'lunet.parallel.Pipeline', ['model parallel'] = 'lunet.parallel.Pipeline',
      ['data parallel'] = 'lunet.parallel.DataParallel', ['planner'] = 'lunet.parallel.plan',
      ['open mpi'] = 'lunet.distributed', ['safetensors'] = 'lunet.serialize' }
    local text = detailed:lower():gsub('%s+', ' ')
    for word, mod in pairs(promised) do
      if text:find(word, 1, true) then
        local ok, err = pcall(require, mod)
        assert(ok, ('the rockspec promises %s, but %s does not load: %s'):format(word, mod, tostring(err)))
      end
    end
    assert.is_nil(text:find('cuda'), 'the rockspec promises CUDA, which has not run on a GPU yet')
    local comment = spec:match('^(.-)\nrockspec_format')
    assert.truthy(comment:find('oneDNN', 1, true), comment)
    -- every -dev package tools/install-deps.sh installs to build is named
    local pkgs = readfile(root .. 'tools/install-deps.sh'):match('\npkgs="([^"]+)"')
    for p in pkgs:gmatch('%S+') do
      if p:match('%-dev$') and p ~= 'python3-dev' then
        assert.truthy(comment:find(p, 1, true), 'rockspec comment lacks ' .. p)
      end
    end
  end)
end)
