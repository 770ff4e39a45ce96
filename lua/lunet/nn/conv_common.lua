-- What the six convolution modules share (nn.Conv1d/2d/3d and
-- nn.ConvTranspose1d/2d/3d): the constructor's checks and geometry, the
-- weight and bias, padding modes, output_size for the transposed ones, and
-- the repr. A module file keeps its doc, its functional form and what is
-- its own (Conv2d's fused inference). Sizes are stored as before: a number
-- (1-d), the number or {h, w} given (2-d), {d, h, w} (3-d).
local lunet = require 'lunet'
local is_table = require('lunet.core').is_table   -- (a table, not a tensor)
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'
local init = require 'lunet.nn.initializers'

local M = {}

local OPTS = { stride = 'number|table', padding = 'number|table|string', dilation = 'number|table',
  groups = 'number', bias = 'boolean', padding_mode = 'string', dtype = true, device = true }
local TRANSPOSED_OPTS = { stride = 'number|table', padding = 'number|table', output_padding = 'number|table',
  groups = 'number', bias = 'boolean', dilation = 'number|table', padding_mode = 'string', dtype = true, device = true }
local POSITIONAL = { 'stride', 'padding', 'dilation', 'groups', 'bias' }
local TRANSPOSED_POSITIONAL = { 'stride', 'padding', 'output_padding', 'groups', 'bias', 'dilation' }
M.POSITIONAL, M.TRANSPOSED_POSITIONAL = POSITIONAL, TRANSPOSED_POSITIONAL   -- (the lazy ones read groups)
local PADDING_MODES = { zeros = 'constant', reflect = 'reflect', replicate = 'replicate', circular = 'circular' }

-- a size option read as an nd-d layer stores it (v nil: the default)
local function read(name, nd, what, v, default, min)
  if nd == 1 then return options.single(name, what, v, min) or default end
  if nd == 2 then return options.pair(name, what, v, min) or default end
  return { options.triple(name, what, v or default, min) }
end

-- entry i of a stored size (a number stands for every dim)
local function at(v, i) if is_table(v) then return v[i] end return v end
M.at = at

-- Checks the arguments of nn.<Conv|ConvTranspose><nd>d(cin, cout, k, ...) and
-- sets the module's fields, weight and bias (initialised as torch's).
function M.init(self, name, nd, transposed, cin, cout, k, ...)
  if type(cin) ~= 'number' or type(cout) ~= 'number' or (type(k) ~= 'number' and not is_table(k)) then
    options.fail(name, 'expected (in_channels, out_channels, kernel_size[, stride, padding, ...][, opts])')
  end
  local opts = options.check(name, options.positional(name, transposed and TRANSPOSED_POSITIONAL or POSITIONAL, ...),
    transposed and TRANSPOSED_OPTS or OPTS) or {}
  local mode = opts.padding_mode or 'zeros'
  if not PADDING_MODES[mode] or transposed and mode ~= 'zeros' then
    options.fail(name, ("padding_mode '%s' is not supported (%s)"):format(mode,
      transposed and "only 'zeros', as PyTorch's" or "'zeros', 'reflect', 'replicate' or 'circular'"))
  end
  local groups = opts.groups or 1
  -- (2.5 channels read as 2 in the divisibility message, which blamed the groups)
  for _, c in ipairs({ { 'in_channels', cin, transposed and 1 or 0 }, { 'out_channels', cout, 1 },
    { 'groups', groups, 1 } }) do
    if not (c[2] % 1 == 0 and c[2] >= c[3] and c[2] < 2 ^ 31) then
      options.fail(name, ('%s must be an integer >= %d, got %s'):format(c[1], c[3], tostring(c[2])))
    end
  end
  if cin % groups ~= 0 or cout % groups ~= 0 then
    options.fail(name, ('in_channels %d and out_channels %d must be divisible by groups %d'):format(cin, cout, groups))
  end
  local kernel = read(name, nd, 'kernel_size', k, nil, 1)
  local stride = read(name, nd, 'stride', opts.stride, 1, 1)
  local dilation = read(name, nd, 'dilation', opts.dilation, 1, 1)
  local padding = opts.padding or 0
  if padding == 'same' and not transposed then
    for i = 1, nd do
      if at(stride, i) ~= 1 then options.fail(name, "padding='same' is not supported for strided convolutions") end
    end
  elseif padding ~= 'valid' or transposed then
    padding = read(name, nd, 'padding', opts.padding, 0, 0)
  end
  self.in_channels, self.out_channels, self.groups = cin, cout, groups
  self.kernel_size = {}
  for i = 1, nd do self.kernel_size[i] = at(kernel, i) end
  self.stride, self.padding, self.dilation, self.padding_mode = stride, padding, dilation, mode
  self._opts = { stride = stride, padding = padding, dilation = dilation, groups = groups }
  if transposed then
    local op = read(name, nd, 'output_padding', opts.output_padding, 0, 0)
    for i = 1, nd do
      if not (at(op, i) < at(stride, i) or at(op, i) < at(dilation, i)) then
        options.fail(name, ('output_padding %s must be smaller than stride %s or dilation %s'):format(
          M.size_text(op), M.size_text(stride), M.size_text(dilation)))
      end
    end
    self.output_padding, self._opts.output_padding = op, op
  elseif mode ~= 'zeros' then
    -- (torch's _reversed_padding_repeated_twice: F.pad's order, last dim first)
    local pad = {}
    for i = nd, 1, -1 do
      local lo, hi = at(padding, i), at(padding, i)
      if padding == 'valid' then lo, hi = 0, 0
      elseif padding == 'same' then
        local total = at(dilation, i) * (self.kernel_size[i] - 1)
        lo = math.floor(total / 2); hi = total - lo
      end
      pad[#pad + 1] = lo; pad[#pad + 1] = hi
    end
    for _, v in ipairs(pad) do
      if v ~= 0 then self._pad = pad; break end
    end
    self._opts.padding = 0
  end
  local shape = { transposed and cin or cout, (transposed and cout or cin) / groups }
  for i = 1, nd do shape[i + 2] = self.kernel_size[i] end
  local o = { dtype = opts.dtype, device = opts.device }
  self:register_parameter('weight', lunet.empty(shape, o))
  if opts.bias ~= false then self:register_parameter('bias', lunet.empty({ cout }, o)) end
  self:reset_parameters()
end

-- torch's default: kaiming_uniform(a = sqrt(5)) and a bias bound of
-- 1/sqrt(fan_in), fan_in from the weight's dims 2.. (in/groups for a
-- convolution, out/groups for a transposed one, times the kernel)
function M.reset_parameters(self)
  lunet.no_grad(init.default_, self.weight, self.bias)
end

-- the input a convolution runs on: padded by its padding_mode unless zeros
function M.padded(self, x)
  if self._pad == nil then return x end
  return F.pad(x, self._pad, PADDING_MODES[self.padding_mode])
end

-- a transposed convolution's options for m(x, output_size): output_padding
-- that reaches output_size ({spatial...} or {N, C, spatial...}), as torch's
-- _output_padding; the stored options when output_size is nil
function M.transposed_opts(self, name, x, size)
  local opts = self._opts
  if size == nil then return opts end
  local nd = #self.kernel_size
  local names = ({ '{L}', '{H, W}', '{D, H, W}' })[nd]
  if not is_table(size) or (#size ~= nd and #size ~= nd + 2) then
    options.fail(name, ('output_size must be %s or {N, C, %s}, got %s'):format(names, names:sub(2, -2),
      is_table(size) and #size .. ' values' or lunet.is_tensor(size) and 'a tensor' or type(size)))
  end
  if not lunet.is_tensor(x) or (x:dim() ~= nd + 1 and x:dim() ~= nd + 2) then return opts end   -- (F says what is wrong)
  local op, first = {}, x:dim() - nd
  for i = 1, nd do
    local want, s, n = size[#size - nd + i], at(self.stride, i), x:size(first + i)
    local least = (n - 1) * s - 2 * at(self.padding, i) + at(self.dilation, i) * (self.kernel_size[i] - 1) + 1
    if type(want) ~= 'number' or want % 1 ~= 0 or want < least or want > least + s - 1 then
      options.fail(name, ('output_size %s must be between %d and %d for an input of size %d'):format(
        tostring(want), least, least + s - 1, n))
    end
    op[i] = want - least
  end
  return { stride = opts.stride, padding = opts.padding, dilation = opts.dilation, groups = opts.groups,
    output_padding = nd == 1 and op[1] or op }
end

-- '2' for 2, {2, 2} or {2, 2, 2}; '1x2' for {1, 2}
function M.size_text(v)
  if not is_table(v) then return tostring(v) end
  for i = 2, #v do
    if v[i] ~= v[1] then return table.concat(v, 'x') end
  end
  return tostring(v[1])
end

-- nn.Conv2d(3 -> 16, 3x3, stride 2, pad 1, dilation 2, groups 2, no bias):
-- the options that differ from their defaults
function M.extra_repr(self)
  local parts = { ('%d -> %d, %s'):format(self.in_channels, self.out_channels, table.concat(self.kernel_size, 'x')) }
  local function show(v, label, default)
    local text = M.size_text(v)
    if text ~= tostring(default) then parts[#parts + 1] = label .. ' ' .. text end
  end
  show(self.stride, 'stride', 1)
  show(self.padding, 'pad', 0)
  if self.padding_mode ~= 'zeros' then parts[#parts + 1] = self.padding_mode end
  if self.output_padding ~= nil then show(self.output_padding, 'output_padding', 0) end
  show(self.dilation, 'dilation', 1)
  show(self.groups, 'groups', 1)
  if not self.bias then parts[#parts + 1] = 'no bias' end
  return table.concat(parts, ', ')
end

return M
