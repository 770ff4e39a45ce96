-- Helpers shared by the specs: require 'support.fixtures' (tools/run-specs.sh
-- puts spec/ on LUA_PATH).
local lunet = require 'lunet'
local json = require 'lunet.json'
local assert = require 'luassert'

local M = {}

-- spec/ (this file is spec/support/fixtures.lua)
local spec_dir = debug.getinfo(1, 'S').source:match('^@(.*/)support/[^/]*$') or 'spec/'

-- the message of the error f(...) raises (it must raise one). An error raised
-- at its caller's level names this file: a spec that checks that errors point
-- at its own lines keeps its own err_of.
function M.err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok, 'expected an error')
  return tostring(e)
end

-- spec/fixtures/<name>.safetensors (from tools/gen_*_fixtures.py): its tensors
-- and the cases its metadata entry "cases" lists (JSON), then the metadata
function M.load_fixture(name)
  local fx, meta = lunet.load(spec_dir .. 'fixtures/' .. name .. '.safetensors')
  return fx, json.decode(meta.cases), meta
end

-- largest |a - b| over two tensors, compared in float64
function M.maxdiff(a, b) return (a:double() - b:double()):abs():max():item() end

-- largest |a - b| / largest |b| over a tensor (a may live on another device)
function M.rel(a, b)
  local d = (a:to('cpu:0') - b):abs():max():item()
  return d / math.max(b:abs():max():item(), 1e-12)
end

-- the largest rel over two lists of tensors (those of list_b on cpu:0)
function M.max_rel(list_a, list_b)
  local worst = 0
  for i = 1, #list_b do worst = math.max(worst, M.rel(list_a[i], list_b[i])) end
  return worst
end

return M
