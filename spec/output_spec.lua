-- What lunet prints and draws (issue 22): the SVG's ticks at round values
-- with a grid and one tick per epoch, progress lines when stdout is no
-- terminal, parameter counts grouped alike everywhere, and the demo's
-- validation split, single test figure and the path of its curves.
local lunet = require 'lunet'
local plot = require 'lunet.plot'

local function readfile(path)
  local f = assert(io.open(path, 'rb'))
  local s = f:read('*a'); f:close(); return s
end

local tmp = os.tmpname()
teardown(function() os.execute(('rm -rf %q %q.svg %q.d'):format(tmp, tmp, tmp)) end)

describe('plot.curves', function()
  local function history(n, f)
    local h = {}
    for i = 1, n do h[i] = f(i) end
    return h
  end

  local function is_round(v, step)
    local k = v / step
    return math.abs(k - math.floor(k + 0.5)) < 1e-6
  end

  it('puts y ticks at round values, one x tick per epoch, and a light grid', function()
    local cases = {
      history(4, function(i) return { train_loss = 0.6 / i + 0.013, val_loss = 0.5 / i + 0.031,
        train_acc = 0.8 + 0.031 * i, val_acc = 0.79 + 0.033 * i } end),
      history(7, function(i) return { train_loss = 2.3 - 0.17 * i, train_acc = 0.11 + 0.07 * i } end),
      history(1, function() return { train_loss = 0.146, train_acc = 0.237 } end),
      history(30, function(i) return { train_loss = 1 / i, train_acc = 1 - 1 / (i + 1) } end),
    }
    for c, h in ipairs(cases) do
      local path = tmp .. '.svg'
      plot.curves(path, h)
      local svg = readfile(path)
      local panels = {}
      for g in svg:gmatch('<g transform.-</g>') do panels[#panels + 1] = g end
      assert.equal(2, #panels)
      for _, g in ipairs(panels) do
        local ys, xs = {}, {}
        for v in g:gmatch('text%-anchor="end">([^<]+)</text>') do ys[#ys + 1] = tonumber(v) end
        for v in g:gmatch('text%-anchor="middle">(%d+)</text>') do xs[#xs + 1] = tonumber(v) end
        assert.truthy(#ys >= 2 and #ys <= 12, ('case %d: %d y ticks'):format(c, #ys))
        local step = ys[2] - ys[1]
        local m = step / 10 ^ math.floor(math.log10(step) + 1e-9)
        assert.truthy(math.abs(m - 1) < 1e-6 or math.abs(m - 2) < 1e-6 or math.abs(m - 5) < 1e-6,
          ('case %d: tick step %s'):format(c, step))
        for i, v in ipairs(ys) do
          assert.truthy(is_round(v, step), ('case %d: tick %s'):format(c, v))
          if i > 1 then assert.truthy(math.abs(v - ys[i - 1] - step) < 1e-9) end
        end
        -- every epoch a tick (every k-th when there are many), starting at 1
        assert.equal(1, xs[1])
        if #h <= 12 then assert.equal(#h, #xs) else assert.truthy(#xs >= 6 and xs[#xs] <= #h) end
        local _, grid = g:gsub('stroke="#e6e6e6"', '')
        assert.equal(#ys + #xs, grid)
      end
    end
  end)
end)

describe('fit progress without a terminal', function()
  it('prints a line every Progress.line_every seconds instead of nothing until the epoch ends', function()
    assert.truthy(require('lunet.progress').line_every <= 10)
    local script = [[
local lunet = require 'lunet'
require('lunet.progress').line_every = 0
local ds = lunet.data.Synthetic { n = 64, shape = {4}, classes = 3 }
lunet.fit(lunet.nn.Linear(4, 3), lunet.data.DataLoader(ds, { batch_size = 16 }), { epochs = 2 })]]
    local f = assert(io.open(tmp, 'w')); f:write(script); f:close()
    local p = io.popen(("luajit %q 2>&1 | cat"):format(tmp))
    local out = p:read('*a'); p:close()
    for e = 1, 2 do
      for s = 1, 3 do
        assert.truthy(out:find(('epoch %d/2  step %d/4  loss %%d'):format(e, s)), out)
      end
      assert.truthy(out:find(('\nepoch %d/2  loss'):format(e)) or out:find(('^epoch %d/2  loss'):format(e)), out)
    end
    assert.is_nil(out:find('\r', 1, true), out)   -- no bar redrawn into a log
  end)

  it("takes progress = 'lines' and names a bad progress value", function()
    local ds = lunet.data.Synthetic { n = 8, shape = { 2 }, classes = 2 }
    local ok, err = pcall(lunet.fit, lunet.nn.Linear(2, 2), lunet.data.DataLoader(ds), { progress = 'bar', quiet = true })
    assert.is_false(ok)
    assert.truthy(err:find("fit: progress must be true, false or 'lines', got 'bar'", 1, true), err)
    assert.is_table(lunet.fit(lunet.nn.Linear(2, 2), lunet.data.DataLoader(ds, { batch_size = 4 }),
      { progress = 'lines', quiet = true }))
  end)
end)

describe('parameter counts', function()
  it('are grouped with commas in modules and DataParallel alike', function()
    local m = lunet.nn.Linear(100, 400)
    assert.truthy(tostring(m):find('\n40,400 parameters$'), tostring(m))
    assert.equal('1,234,567', lunet.nn.Module.format_count(1234567))
    assert.equal('999', lunet.nn.Module.format_count(999))
    local p = io.popen([[LUNET_CPU_DEVICES=2 luajit -e "local l = require 'lunet'
      print(l.parallel.DataParallel(l.nn.Linear(100, 400), {devices = l.devices()}))" 2>&1]])
    local out = p:read('*a'); p:close()
    assert.truthy(out:find('\n40,400 parameters per replica\n', 1, true), out)
  end)
end)

describe('the demo (examples/fashion_mnist.lua --smoke)', function()
  it('validates on a held-out split, tests once at the end and says where the curves are', function()
    local f = io.open('/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz')
    if not f then pending('dataset-fashion-mnist is not installed'); return end
    f:close()
    local svg = tmp .. '.d/curves.svg'
    os.execute(('mkdir -p %q.d'):format(tmp))
    local p = io.popen(('luajit examples/fashion_mnist.lua --smoke --plot %q 2>&1'):format(svg))
    local out = p:read('*a'); p:close()
    assert.truthy(out:find('\n1,024 training, 512 validation, 512 test images\n', 1, true), out)
    assert.truthy(out:find('\n421,834 parameters\n', 1, true), out)
    local val = out:match('\nepoch 1/1 [^\n]* val_acc (%d+%.%d+)%%')
    local test = out:match('\ntest accuracy: (%d+%.%d+)%% %(512 test images, 1 epoch, ')
    assert.truthy(val and test, out)
    local _, ntest = out:gsub('test accuracy', '')
    assert.equal(1, ntest)
    assert.truthy(out:find('\nloss and accuracy curves: ' .. svg .. ' (open it in a browser)\n', 1, true), out)
    assert.truthy(readfile(svg):find('<svg', 1, true))
  end)
end)
