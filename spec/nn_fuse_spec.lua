-- lunet.nn.fuse: the fusion pass is not Sequential's own; any container whose
-- children run in order can use it and gets Sequential's results bit for bit.
local lunet = require 'lunet'
local nn = lunet.nn
local fuse = require 'lunet.nn.fuse'
local Module = require 'lunet.nn.Module'

local Chain = Module:extend('test.Chain')
function Chain:__init(mods) for i, m in ipairs(mods) do self:add_module('m' .. i, m) end end
function Chain:forward(x) return fuse.forward(self, x) end

local maxdiff = require('support.fixtures').maxdiff

describe('nn.fuse', function()
  it('a container of its own runs the same fused ops as nn.Sequential', function()
    lunet.manual_seed(5)
    local function mods()
      return { nn.Conv2d(3, 8, 3, { padding = 1, bias = false }), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.BasicBlock(8, 8), nn.BasicBlock(8, 16, 2) }
    end
    local seq = nn.Sequential(mods())
    local chain = Chain(mods())
    chain:load_state_dict((function()
      local sd = {}
      for k, v in pairs(seq:state_dict()) do
        local i, rest = k:match('^(%d+)%.(.*)$')
        sd['m' .. (tonumber(i) + 1) .. '.' .. rest] = v
      end
      return sd
    end)())
    local x = lunet.randn(2, 3, 12, 12)
    -- training (BatchNorm -> ReLU fused) and eval (conv + bn + relu, block chains)
    assert.equal(0, maxdiff(seq(x), chain(x)))
    seq:eval(); chain:eval()
    local a = lunet.no_grad(function() return seq(x) end)
    local b = lunet.no_grad(function() return chain(x) end)
    assert.equal(0, maxdiff(a, b))
    -- the fused path ran: the batch norm's own forward was not called
    local calls = 0
    local bn = chain.m2
    local cls_forward = getmetatable(bn).forward
    getmetatable(bn).forward = function(self, y) calls = calls + 1; return cls_forward(self, y) end
    local ok, err = pcall(function() lunet.no_grad(function() return chain(x) end) end)
    getmetatable(bn).forward = cls_forward
    assert(ok, err)
    assert.equal(0, calls)
  end)

  it('takes rules for other layer types (fuse.add), tried only where a run starts with that class', function()
    local Double = Module:extend('test.Double')
    function Double:forward(x) return x * 2 end
    local fused = 0
    fuse.add({ Double }, function(self, names, i, n, x)
      if i < n and getmetatable(self[names[i + 1]]) == Double then fused = fused + 1; return x * 4, 2 end
    end)
    local ok, err = pcall(function()
      local seq = nn.Sequential { Double(), Double(), nn.ReLU(), Double() }
      assert.tensor_near(seq(lunet.tensor({ 1, -2 })), { 8, 0 })
      assert.equal(1, fused)   -- the pair, not the last one alone
    end)
    assert(ok, err)
  end)
end)
