-- nn.Module's public methods against torch.nn.Module 1.13's: the cases and
-- expected values below are torch's (keys, their order, what is missing or
-- unexpected, the error each misuse gives), with lunet's options tables.
local lunet = require 'lunet'
local nn = lunet.nn
local fx = require 'support.fixtures'

local function names(list)
  local out = {}
  for i, e in ipairs(list) do out[i] = e[1] end
  return out
end
local function keys(sd)
  local out = {}
  for k in pairs(sd) do out[#out + 1] = k end
  table.sort(out)
  return out
end

-- nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)) with a non-persistent buffer 'np' on the BatchNorm
local function lin_bn()
  local m = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
  m['1']:register_buffer('np', lunet.ones(1), { persistent = false })
  return m
end

describe('nn.Module API (torch 1.13)', function()
  it('state_dict: parameters and persistent buffers in torch order, prefix, keep_vars, destination', function()
    local m = lin_bn()
    -- torch: ['0.weight', '0.bias', '1.weight', '1.bias', '1.running_mean', '1.running_var', '1.num_batches_tracked']
        local order = {}
    for i, e in ipairs(m:_state_entries('')) do order[i] = e[1] end
    assert.same({ '0.weight', '0.bias', '1.weight', '1.bias', '1.running_mean', '1.running_var', '1.num_batches_tracked' }, order)
    local sd = m:state_dict()
    assert.is_nil(sd['1.np'])
    assert.same({ '0.bias', '0.weight', '1.bias', '1.num_batches_tracked', '1.running_mean', '1.running_var', '1.weight' }, keys(sd))
    assert.is_false(sd['0.weight'].requires_grad)   -- detached, sharing storage
    assert.is_true(m:state_dict({ keep_vars = true })['0.weight'] == m['0'].weight)
    local p = m:state_dict({ prefix = 'model.' })
    assert.is_not_nil(p['model.1.running_var'])
    assert.is_nil(p['1.running_var'])
    local dest = { other = lunet.zeros(1) }
    assert.equal(dest, m:state_dict({ destination = dest }))
    assert.is_not_nil(dest.other)
    assert.is_not_nil(dest['0.weight'])
    -- the non-persistent buffer is still a buffer: it moves and is listed
    assert.same({ '1.running_mean', '1.running_var', '1.num_batches_tracked', '1.np' }, names(m:named_buffers()))
    assert.equal('float64', m:double()['1'].np.dtype)
    assert.has_error(function() m:state_dict({ prefx = 'a' }) end, "state_dict: unknown option 'prefx' (did you mean 'prefix'?)")
    -- registering again as persistent puts it back
    m['1']:register_buffer('np', lunet.ones(1))
    assert.is_not_nil(m:state_dict()['1.np'])
  end)

  it('state_dict lists a shared module under every name; parameters() and named_modules() once', function()
    local l = nn.Linear(2, 2)
    local t = nn.Sequential(l, l)
    -- torch: ['0.weight', '0.bias', '1.weight', '1.bias'] / ['0.weight', '0.bias'] / ['', '0'] / ['', '0', '1'] / ['0']
    assert.same({ '0.bias', '0.weight', '1.bias', '1.weight' }, keys(t:state_dict()))
    assert.same({ '0.weight', '0.bias' }, names(t:named_parameters()))
    assert.same({ '', '0' }, names(t:named_modules()))
    assert.same({ '', '0', '1' }, names(t:named_modules({ remove_duplicate = false })))
    assert.same({ 'net', 'net.0' }, names(t:named_modules({ prefix = 'net' })))
    assert.same({ '0' }, names(t:named_children()))
    assert.equal(1, #t:children())
    assert.equal(2, #t:modules())
    -- a tied checkpoint loads, strictly
    local r = t:load_state_dict(t:state_dict())
    assert.same({}, r.missing_keys)
    assert.same({}, r.unexpected_keys)
  end)

  it('load_state_dict: missing keys in module order, unexpected, non-persistent buffers unexpected', function()
    local m = lin_bn()
    local sd = m:state_dict()
    sd['0.bias'], sd['1.running_mean'] = nil, nil
    sd.x, sd['1.np'] = lunet.ones(1), lunet.ones(1)
    -- torch: missing_keys=['0.bias', '1.running_mean'], unexpected_keys=['x', '1.np']
    local r = m:load_state_dict(sd, { strict = false })
    assert.same({ '0.bias', '1.running_mean' }, r.missing_keys)
    assert.same({ '1.np', 'x' }, r.unexpected_keys)   -- (sorted: a Lua table has no order)
    local err = fx.err_of(m.load_state_dict, m, sd)
    assert.matches('load_state_dict: missing keys: 0.bias, 1.running_mean; unexpected keys: 1.np, x', err, 1, true)
    -- a strict failure copies nothing
    local m2 = lin_bn()
    local w = m2['0'].weight:clone()
    local sd2 = lin_bn():state_dict()
    sd2.x = lunet.ones(1)
    assert.has_error(function() m2:load_state_dict(sd2) end)
    assert.tensor_near(w, m2['0'].weight, 0)
    assert.has_error(function() m2:load_state_dict(sd2, { strickt = false }) end)
  end)

  it('register_load_state_dict_post_hook: runs children first, may forgive keys in place; handle removes it', function()
    local m = nn.Sequential(nn.Linear(2, 2))
    local seen = {}
    local function h(mod, k)
      seen[#seen + 1] = { mod.__name, table.concat(k.unexpected_keys, ',') }
      for i = #k.unexpected_keys, 1, -1 do k.unexpected_keys[i] = nil end
    end
    local h1 = m:register_load_state_dict_post_hook(h)
    m['0']:register_load_state_dict_post_hook(h)
    local src = nn.Sequential(nn.Linear(2, 2))
    local sd = src:state_dict()
    sd.z = lunet.ones(1)
    -- torch: <All keys matched successfully> [('Linear', ['z']), ('Sequential', [])]
    local r = m:load_state_dict(sd)
    assert.same({ { 'nn.Linear', 'z' }, { 'nn.Sequential', '' } }, seen)
    assert.same({}, r.unexpected_keys)
    assert.tensor_near(src['0'].weight, m['0'].weight, 0)   -- loaded before the hooks ran
    h1:remove()
    m['0']:register_load_state_dict_post_hook(function() return 1 end)
    assert.matches('post hook should return nothing', fx.err_of(m.load_state_dict, m, m:state_dict()), 1, true)
    assert.matches('expected a function', fx.err_of(m.register_load_state_dict_post_hook, m, 'x'), 1, true)
  end)

  it('get_extra_state / set_extra_state travel under _extra_state', function()
    local E = nn.Module:extend('E')
    function E:__init() self.lin = nn.Linear(1, 1); self.n = 3 end
    function E:get_extra_state() return lunet.tensor({ self.n }) end
    function E:set_extra_state(s) self.n = s[1]:item() end
    local a, b = E(), E()
    b.n = 7
    -- torch: ['_extra_state', 'lin.weight', 'lin.bias']
    assert.same({ '_extra_state', 'lin.bias', 'lin.weight' }, keys(b:state_dict()))
    a:load_state_dict(b:state_dict())
    assert.equal(7, a.n)
    local sd = b:state_dict()
    sd._extra_state = nil
    assert.same({ '_extra_state' }, a:load_state_dict(sd, false).missing_keys)
    assert.matches('get_extra_state: not implemented by nn.Linear', fx.err_of(nn.Linear(1, 1).get_extra_state, nn.Linear(1, 1)), 1, true)
  end)

  it('get_submodule, get_parameter, get_buffer by dotted name, with torch errors', function()
    local m = lin_bn()
    assert.equal(m, m:get_submodule(''))
    assert.equal(m['1'], m:get_submodule('1'))
    assert.equal(m['0'].weight, m:get_parameter('0.weight'))
    assert.equal(m['1'].running_mean, m:get_buffer('1.running_mean'))
    assert.equal(m['1'].np, m:get_buffer('1.np'))   -- (non-persistent buffers too, as torch)
    local outer = nn.Sequential(m)
    assert.equal(m['1'], outer:get_submodule('0.1'))
    assert.equal(m['1'].weight, outer:get_parameter('0.1.weight'))
    -- torch: Linear has no attribute `foo` / `weight` is not an nn.Module / `running_mean` is not an nn.Parameter / `weight` is not a buffer
    assert.matches('get_submodule: nn.Linear has no attribute `foo`', fx.err_of(m.get_submodule, m, '0.foo'), 1, true)
    assert.matches('get_submodule: `weight` is not an nn.Module', fx.err_of(m.get_submodule, m, '0.weight'), 1, true)
    assert.matches('get_parameter: `running_mean` is not a parameter', fx.err_of(m.get_parameter, m, '1.running_mean'), 1, true)
    assert.matches('get_buffer: `weight` is not a buffer', fx.err_of(m.get_buffer, m, '0.weight'), 1, true)
    assert.matches('get_parameter: nn.Sequential has no attribute `9`', fx.err_of(m.get_parameter, m, '9.weight'), 1, true)
    assert.matches('get_buffer: nn.Linear has no attribute `nope`', fx.err_of(m.get_buffer, m, '0.nope'), 1, true)
    assert.matches('get_submodule: target must be a string, got number', fx.err_of(m.get_submodule, m, 1), 1, true)
  end)

  it('register_buffer, register_parameter, add_module/register_module refuse names as torch', function()
    local m = nn.Linear(2, 2)
    -- torch: buffer name can't contain "." / attribute 'weight' already exists
    assert.matches([[register_buffer: buffer name can't contain ".", got 'a.b']], fx.err_of(m.register_buffer, m, 'a.b', lunet.ones(1)), 1, true)
    assert.matches("register_buffer: attribute 'weight' already exists", fx.err_of(m.register_buffer, m, 'weight', lunet.ones(1)), 1, true)
    assert.matches("register_buffer: buffer name can't be empty", fx.err_of(m.register_buffer, m, '', lunet.ones(1)), 1, true)
    assert.matches('register_buffer: buffer name must be a string, got number', fx.err_of(m.register_buffer, m, 1, lunet.ones(1)), 1, true)
    assert.matches("register_buffer: unknown option 'persistant'",
      fx.err_of(m.register_buffer, m, 'b', lunet.ones(1), { persistant = false }), 1, true)
    assert.matches([[add_module: module name can't contain "."]], fx.err_of(m.add_module, m, 'x.y', nn.ReLU()), 1, true)
    assert.matches("add_module: attribute 'bias' already exists", fx.err_of(m.add_module, m, 'bias', nn.ReLU()), 1, true)
    m:register_buffer('b', lunet.ones(1), false)   -- (torch's positional persistent)
    assert.matches("register_parameter: attribute 'b' already exists", fx.err_of(m.register_parameter, m, 'b', lunet.ones(1)), 1, true)
    assert.is_nil(m:state_dict().b)
    local r = nn.ReLU()
    assert.equal(r, m:register_module('act', r))
    assert.same({ 'act' }, names(m:named_children()))
  end)

  it('parameters, buffers and their named forms: recurse = false, prefix', function()
    local m = lin_bn()
    -- torch: named_parameters(recurse=False) -> [] ; bn.named_buffers(prefix='bn', recurse=False)
    assert.same({}, m:parameters(false))
    assert.same({}, m:parameters({ recurse = false }))
    assert.same({}, m:named_parameters({ recurse = false }))
    assert.equal(4, #m:parameters())
    assert.equal(2, #m['0']:parameters({ recurse = false }))
    assert.same({ 'bn.running_mean', 'bn.running_var', 'bn.num_batches_tracked', 'bn.np' },
      names(m['1']:named_buffers({ prefix = 'bn', recurse = false })))
    assert.same({ 'm.0.weight', 'm.0.bias', 'm.1.weight', 'm.1.bias' }, names(m:named_parameters('m')))
    assert.equal(4, #m:buffers())
    assert.equal(0, #m:buffers({ recurse = false }))
    assert.matches('parameters: recurse must be true or false, got string', fx.err_of(m.parameters, m, 'no'), 1, true)
    assert.matches("named_buffers: unknown option 'recursive'", fx.err_of(m.named_buffers, m, { recursive = false }), 1, true)
    assert.matches("named_modules: unknown option 'memo'", fx.err_of(m.named_modules, m, { memo = {} }), 1, true)
  end)

  it('zero_grad zeroes in place by default (torch 1.13); set_to_none leaves .grad nil', function()
    local m = nn.Linear(2, 2)
    m(lunet.ones(1, 2)):sum():backward()
    local g = m.weight.grad
    m:zero_grad()
    assert.equal(g, m.weight.grad)   -- torch 1.13: l.weight.grad is g, sum 0
    assert.equal(0, g:abs():sum():item())
    m:zero_grad({ set_to_none = true })
    assert.is_nil(m.weight.grad)
    assert.is_nil(m.bias.grad)
    m:zero_grad()   -- (no grads: nothing to zero)
    assert.is_nil(m.weight.grad)
  end)

  it('requires_grad_, train, eval return self', function()
    local m = lin_bn()
    assert.equal(m, m:requires_grad_(false))
    for _, p in ipairs(m:parameters()) do assert.is_false(p.requires_grad) end
    assert.equal(m, m:requires_grad_())
    assert.is_true(m['0'].weight.requires_grad)
    assert.matches('requires_grad_: expected true or false, got string', fx.err_of(m.requires_grad_, m, 'no'), 1, true)
    assert.equal(m, m:train(false))
    assert.is_false(m['1'].training)
    assert.equal(m, m:eval())
    assert.equal(m, m:train())
    assert.is_true(m['1'].training)
  end)

  it('half, bfloat16, float, double cast floating tensors; type(dtype) casts every one, as torch', function()
    local m = lin_bn()
    assert.equal(m, m:half())
    assert.equal('float16', m['0'].weight.dtype)
    assert.equal('int64', m['1'].num_batches_tracked.dtype)
    m:bfloat16()
    assert.equal('bfloat16', m['1'].running_var.dtype)
    m:float()
    assert.equal('float32', m['0'].bias.dtype)
    -- torch: nn.BatchNorm1d(2).type(torch.float64).num_batches_tracked.dtype == float64
    assert.equal(m, m:type('float64'))
    assert.equal('float64', m['1'].num_batches_tracked.dtype)
    assert.equal('float64', m['0'].weight.dtype)
    -- torch: m.to(tensor) takes its device and dtype
    m:to(lunet.zeros(1, { dtype = 'float32' }))
    assert.equal('float32', m['0'].weight.dtype)
    assert.equal('float32', m['1'].num_batches_tracked.dtype)   -- (a float since type('float64'))
    assert.matches('to: a module moves to a floating-point dtype', fx.err_of(m.to, m, lunet.zeros(1, { dtype = 'int64' })), 1, true)
    assert.matches('type: a module casts to a floating-point dtype', fx.err_of(m.type, m, 'int32'), 1, true)
    assert.matches('type: expected a dtype name', fx.err_of(m.type, m, nil), 1, true)
    assert.matches('cuda: device index must be an integer', fx.err_of(m.cuda, m, 'x'), 1, true)
    assert.matches('share_memory: not supported', fx.err_of(m.share_memory, m), 1, true)
  end)

  it('apply visits children first, then self, and returns self; extra_repr shows in printing', function()
    local m = lin_bn()
    local seen = {}
    assert.equal(m, m:apply(function(x) seen[#seen + 1] = x.__name end))
    assert.same({ 'nn.Linear', 'nn.BatchNorm1d', 'nn.Sequential' }, seen)
    local C = nn.Module:extend('C')
    function C:__init() end
    function C:extra_repr() return 'k=3' end
    assert.matches('^C%(k=3%)', tostring(C()))
  end)
  it('hostile arguments to each method: a string error naming the method, or success', function()
    local hostile = { 1, -1, 0.5, true, false, 'x', '', '.', {}, { 1 }, { bogus = 1 }, function() end }
    local methods = { 'get_submodule', 'get_parameter', 'get_buffer', 'register_buffer', 'register_parameter',
      'add_module', 'register_module', 'named_modules', 'named_children', 'named_parameters', 'named_buffers',
      'parameters', 'buffers', 'children', 'modules', 'state_dict', 'load_state_dict', 'zero_grad', 'requires_grad_',
      'train', 'eval', 'type', 'half', 'bfloat16', 'float', 'double', 'cpu', 'apply', 'register_load_state_dict_post_hook' }
    for _, name in ipairs(methods) do
      for _, a in ipairs(hostile) do
        local m = lin_bn()
        local ok, err = pcall(m[name], m, a, a)
        if not ok then
          assert.equal('string', type(err), name)
          local shown = name == 'register_module' and 'add_module' or name
          assert.is_truthy(err:find(shown, 1, true), name .. ' with ' .. tostring(a) .. ': ' .. err)
        end
      end
    end
  end)
end)
