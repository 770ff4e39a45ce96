-- lunet.parallel.atoms: how a model is cut into the units a pipeline's
-- stages are made of, keeping the unwrapped model's parameter names.
local lunet = require 'lunet'
local nn = lunet.nn
local atoms = require 'lunet.parallel.atoms'

describe('parallel.atoms', function()
  it('flattens nested Sequentials and keeps containers such as BasicBlock whole', function()
    local model = nn.Sequential {
      nn.Conv2d(3, 4, 3, { padding = 1 }),
      nn.Sequential { nn.ReLU(), nn.Sequential { nn.BasicBlock(4, 4), nn.MaxPool2d(2) } },
      nn.Flatten(), nn.Linear(4 * 2 * 2, 5),
    }
    local list = atoms.of(model)
    local names, kinds = {}, {}
    for i, a in ipairs(list) do names[i], kinds[i] = a.name, a.module.__name end
    assert.same({ '0', '1.0', '1.1.0', '1.1.1', '2', '3' }, names)
    assert.same({ 'nn.Conv2d', 'nn.ReLU', 'nn.BasicBlock', 'nn.MaxPool2d', 'nn.Flatten', 'nn.Linear' }, kinds)
    assert.equal(model[2][2][1], list[3].module)
    -- the atoms' parameters, named, are the model's, in the model's order
    local got, want = atoms.named_parameters(list), model:named_parameters()
    assert.equal(#want, #got)
    for i = 1, #want do
      assert.equal(want[i][1], got[i][1])
      assert.equal(want[i][2], got[i][2])
    end
    local part = atoms.named_parameters(list, 3, 3)
    assert.equal('1.1.0.conv1.weight', part[1][1])
  end)

  it('takes a model that is not a Sequential as one atom and rejects what is not a module', function()
    local block = nn.BasicBlock(2, 2)
    local list = atoms.of(block)
    assert.equal(1, #list)
    assert.equal(block, list[1].module)
    assert.equal('', list[1].name)
    -- a Sequential with its own forward is a user's container: one atom
    local custom = nn.Sequential { nn.ReLU(), nn.ReLU() }
    custom.forward = function(self, x) return x end
    assert.equal(1, #atoms.of(nn.Sequential { custom, nn.ReLU() }) - 1)
    local ok, err = pcall(atoms.of, 42)
    assert.is_false(ok)
    assert.matches('atoms.of: expected an nn.Module, got number', err, 1, true)
  end)
end)
