-- The list operations nn.Sequential and nn.ModuleList share, as torch 1.13's:
--   c[i] = m          replace the i-th module (torch's c[i - 1] = m), its name kept
--   c:insert(i, m)    before the i-th (i = #c + 1: at the end; -1: before the last)
--   c:pop([i])        remove and return the i-th (default the last)
--   c:extend(list)    append each module of a list (or of another container)
-- Indices are 1-based; negative ones count from the end (-1 the last). A
-- container whose children are named '0', '1', ... (torch's) is renumbered
-- after insert and pop, as torch's; one with names of its own keeps them
-- (insert then names the new module by its position, which must be free).
local options = require 'lunet.options'
local core = require 'lunet.core'

local M = {}

local function is_module(m) return core.is_table(m) and rawget(m, '_params') ~= nil end

local function need_module(fname, m, what)
  if not is_module(m) then options.fail(fname, ('%s must be an nn.Module, got %s'):format(what, core.typename(m))) end
end

-- the position (1..n, or 1..n + 1 with `past`) of index k, or an error
local function position(fname, k, n, past)
  local hi = past and n + 1 or n
  if type(k) ~= 'number' or k % 1 ~= 0 then
    options.fail(fname, ('index must be an integer, got %s'):format(tostring(k)))
  end
  local i = k < 0 and n + k + 1 or k
  if i < 1 or i > hi then
    options.fail(fname, ('index %d out of range (%d modules: 1..%d or -%d..-1)'):format(k, n, hi, n))
  end
  return i
end

-- true when the children are named '0', '1', ... in order
local function numbered(names)
  for i, n in ipairs(names) do if n ~= tostring(i - 1) then return false end end
  return true
end

-- the children as names[1..n] -> modules, renamed '0'..'n-1'
local function renumber(c, mods)
  local names = rawget(c, '_children')
  for _, n in ipairs(names) do rawset(c, n, nil) end
  for i = #names, 1, -1 do names[i] = nil end
  for i, m in ipairs(mods) do
    names[i] = tostring(i - 1)
    rawset(c, names[i], m)
  end
end

local function modules_of(c)
  local out = {}
  for i, n in ipairs(rawget(c, '_children')) do out[i] = rawget(c, n) end
  return out
end

function M.set_item(c, fname, k, m)
  local names = rawget(c, '_children')
  local i = position(fname, k, #names)
  need_module(fname, m, ('[%d] = value'):format(k))
  c:add_module(names[i], m)
end

function M.insert(c, fname, k, m)
  local names = rawget(c, '_children')
  local n = #names
  local i = position(fname .. ':insert', k, n, true)
  need_module(fname .. ':insert', m, 'module')
  for _, d in ipairs(m:modules()) do
    if d == c then options.fail(fname .. ':insert', 'a container cannot hold itself') end
  end
  if numbered(names) then
    local mods = modules_of(c)
    table.insert(mods, i, m)
    renumber(c, mods)
  else
    local name = tostring(i - 1)
    if rawget(c, name) ~= nil then
      options.fail(fname .. ':insert', ("the new module's name '%s' is taken (add(m, name) names it)"):format(name))
    end
    table.insert(names, i, name)
    rawset(c, name, m)
  end
  return c
end

function M.pop(c, fname, k)
  local names = rawget(c, '_children')
  local i = position(fname .. ':pop', k or -1, #names)
  local m = rawget(c, names[i])
  if numbered(names) then
    local mods = modules_of(c)
    table.remove(mods, i)
    renumber(c, mods)
  else
    rawset(c, names[i], nil)
    table.remove(names, i)
  end
  return m
end

function M.extend(c, fname, list)
  if not core.is_table(list) then options.fail(fname .. ':extend', 'expected a list of modules, got ' .. core.typename(list)) end
  local mods = is_module(list) and modules_of(list) or list
  for i = 1, table.maxn(mods) do need_module(fname .. ':extend', mods[i], ('module %d'):format(i)) end
  for i = 1, table.maxn(mods) do c:add_module(tostring(#rawget(c, '_children')), mods[i]) end
  return c
end

return M
