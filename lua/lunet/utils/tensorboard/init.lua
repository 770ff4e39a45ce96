-- lunet.utils.tensorboard: torch.utils.tensorboard's SummaryWriter, writing
-- TensorBoard event files from Lua (no Python, no TensorFlow):
--   local SummaryWriter = require('lunet.utils.tensorboard').SummaryWriter
--   local w = SummaryWriter{log_dir = 'runs/exp1'}     -- or SummaryWriter('runs/exp1')
--   w:add_scalar('loss/train', loss, step)
--   w:add_scalars('loss', {train = a, val = b}, step)  -- one sub-directory writer per tag
--   w:add_histogram('fc.weight', fc.weight, step)      -- bins = 'tensorflow' (default) or a count
--   w:add_text('notes', 'lr 0.1', step); w:add_image('sample', img, step)  -- img C x H x W
--   w:add_hparams({lr = 0.1, opt = 'sgd'}, {['hparam/acc'] = 0.9})
--   w:flush(); w:close()
-- Options: log_dir (default runs/<date>_<host><comment>), comment, purge_step,
-- max_queue = 10, flush_secs = 120, filename_suffix = ''. The methods take
-- torch's arguments by position, or after the required ones an options table
-- (w:add_histogram('w', t, step, {bins = 10})). Lua tables have no order:
-- add_scalars and add_hparams take their keys in sorted order. As torch, a
-- closed writer opens a new event file on its next add_*.
local options = require 'lunet.options'
local core = require 'lunet.core'
local EF = require 'lunet.utils.tensorboard.event_file'
local S = require 'lunet.utils.tensorboard.summary'
local P = require 'lunet.utils.tensorboard.proto'
local fail, typename = options.fail, core.typename
local function is_tensor(x) return require('lunet.tensor').is_tensor(x) end

local SummaryWriter = {}
SummaryWriter.__index = SummaryWriter

local OPTS = { log_dir = 'string', comment = 'string', purge_step = 'number', max_queue = 'number',
  flush_secs = 'number', filename_suffix = 'string' }

local function step_of(fn, s)   -- torch's int(step): None stays unset, fractions truncate
  if s == nil then return nil end
  if type(s) ~= 'number' or s ~= s or s == math.huge or s == -math.huge then
    fail(fn, 'global_step must be an integer, got ' .. (type(s) == 'number' and tostring(s) or typename(s)))
  end
  return s >= 0 and math.floor(s) or math.ceil(s)
end

local function number_of(fn, what, v)   -- a number or a one-element tensor (NaN and inf allowed, as torch)
  if is_tensor(v) then
    if v:numel() ~= 1 then fail(fn, ('%s must hold one element, got a tensor of %d'):format(what, v:numel())) end
    return v:reshape(-1)[1]:item()
  end
  if type(v) ~= 'number' then fail(fn, ('%s must be a number or a one-element tensor, got %s'):format(what, typename(v))) end
  return v
end

-- the host copy of a tensor on a GPU (the PNG encoder reads its bytes, as torch's make_np copies)
local function host(t) return tostring(t.device):match('^cuda') and t:to('cpu:0') or t end

local function str_of(fn, what, v)
  if type(v) ~= 'string' then fail(fn, ('%s must be a string, got %s'):format(what, typename(v))) end
  return v
end

local function walltime_of(fn, t)
  if t ~= nil and type(t) ~= 'number' then fail(fn, 'walltime must be a number (seconds since the epoch), got ' .. typename(t)) end
  return t
end

local function sorted_keys(fn, what, t)
  if type(t) ~= 'table' or is_tensor(t) then fail(fn, ('%s must be a table, got %s'):format(what, typename(t))) end
  local keys = {}
  for k in pairs(t) do
    if type(k) ~= 'string' then fail(fn, ('%s keys must be strings, got %s'):format(what, typename(k))) end
    keys[#keys + 1] = k
  end
  table.sort(keys)
  return keys
end

function SummaryWriter.new(...)
  local fn = 'SummaryWriter'
  local opts = options.positional(fn, { 'log_dir', 'comment', 'purge_step', 'max_queue', 'flush_secs', 'filename_suffix' }, ...) or {}
  options.check(fn, opts, OPTS)
  local self = setmetatable({ comment = opts.comment or '', purge_step = step_of(fn, opts.purge_step),
    max_queue = opts.max_queue or 10, flush_secs = opts.flush_secs or 120, filename_suffix = opts.filename_suffix or '' }, SummaryWriter)
  if not (self.max_queue >= 1 and self.max_queue % 1 == 0) then fail(fn, 'max_queue must be an integer >= 1, got ' .. tostring(self.max_queue)) end
  if not (self.flush_secs >= 0) then fail(fn, 'flush_secs must be a number >= 0, got ' .. tostring(self.flush_secs)) end
  self.log_dir = opts.log_dir or ('runs/' .. os.date('%b%d_%H-%M-%S') .. '_' .. EF.hostname() .. self.comment)
  self:_file_writer()
  return self
end

-- the writer of log_dir, made again after close (as torch's _get_file_writer)
function SummaryWriter:_file_writer()
  if not self.file_writer then
    self.file_writer = EF.new(self.log_dir, self.max_queue, self.flush_secs, self.filename_suffix)
    self.all_writers = { [self.log_dir] = self.file_writer }
    if self.purge_step then   -- a SessionLog START at purge_step: TensorBoard hides later steps of earlier runs
      self.file_writer:add(EF.event(EF.time(), self.purge_step, P.str(3, 'brain.Event:2')))
      self.file_writer:add(EF.event(EF.time(), self.purge_step, P.msg(7, P.varint(1, 1))))
      self.purge_step = nil
    end
  end
  return self.file_writer
end

function SummaryWriter:get_logdir() return self.log_dir end

local function add(w, summary, step, walltime) w:add(EF.event(walltime or EF.time(), step, P.msg(5, summary))) end

function SummaryWriter:add_scalar(tag, value, ...)
  local fn = 'add_scalar'
  local o = options.positional(fn, { 'global_step', 'walltime' }, ...) or {}
  options.check(fn, o, { global_step = true, walltime = true })
  add(self:_file_writer(), S.scalar(str_of(fn, 'tag', tag), number_of(fn, 'scalar_value', value)),
    step_of(fn, o.global_step), walltime_of(fn, o.walltime))
end

function SummaryWriter:add_scalars(main_tag, tag_scalar_dict, ...)
  local fn = 'add_scalars'
  local o = options.positional(fn, { 'global_step', 'walltime' }, ...) or {}
  options.check(fn, o, { global_step = true, walltime = true })
  str_of(fn, 'main_tag', main_tag)
  local keys = sorted_keys(fn, 'tag_scalar_dict', tag_scalar_dict)
  local step, walltime = step_of(fn, o.global_step), walltime_of(fn, o.walltime) or EF.time()
  local vals = {}
  for i, k in ipairs(keys) do vals[i] = number_of(fn, ("tag_scalar_dict['%s']"):format(k), tag_scalar_dict[k]) end
  local dir = self:_file_writer().log_dir
  for i, k in ipairs(keys) do
    local sub = dir .. '/' .. main_tag:gsub('/', '_') .. '_' .. k
    local w = self.all_writers[sub]
    if not w then
      w = EF.new(sub, self.max_queue, self.flush_secs, self.filename_suffix)
      self.all_writers[sub] = w
    end
    add(w, S.scalar(main_tag, vals[i]), step, walltime)
  end
end

function SummaryWriter:add_histogram(tag, values, ...)
  local fn = 'add_histogram'
  local o = options.positional(fn, { 'global_step', 'bins', 'walltime', 'max_bins' }, ...) or {}
  options.check(fn, o, { global_step = true, bins = true, walltime = true, max_bins = true })
  str_of(fn, 'tag', tag)
  if not is_tensor(values) then fail(fn, 'values must be a tensor, got ' .. typename(values)) end
  local bins = o.bins or 'tensorflow'
  if type(bins) == 'number' then
    if not (bins >= 1 and bins % 1 == 0 and bins < 2 ^ 31) then fail(fn, 'bins must be an integer >= 1, got ' .. tostring(bins)) end
  elseif type(bins) == 'table' and not is_tensor(bins) then
    for i = 1, #bins do
      if type(bins[i]) ~= 'number' or i > 1 and not (bins[i] >= bins[i - 1]) then fail(fn, 'bins (a list of edges) must be increasing numbers') end
    end
    if #bins < 2 then fail(fn, 'bins (a list of edges) needs at least 2 edges') end
  elseif bins ~= 'tensorflow' then
    fail(fn, "bins must be 'tensorflow', a number of bins or a list of edges, got " .. (type(bins) == 'string' and ("'" .. bins .. "'") or typename(bins)))
  end
  local mb = o.max_bins
  if mb ~= nil and not (type(mb) == 'number' and mb >= 1 and mb % 1 == 0) then fail(fn, 'max_bins must be an integer >= 1, got ' .. tostring(mb)) end
  add(self:_file_writer(), S.histogram(fn, tag, host(values), bins, mb), step_of(fn, o.global_step), walltime_of(fn, o.walltime))
end

function SummaryWriter:add_text(tag, text_string, ...)
  local fn = 'add_text'
  local o = options.positional(fn, { 'global_step', 'walltime' }, ...) or {}
  options.check(fn, o, { global_step = true, walltime = true })
  add(self:_file_writer(), S.text(str_of(fn, 'tag', tag), str_of(fn, 'text_string', text_string)),
    step_of(fn, o.global_step), walltime_of(fn, o.walltime))
end

-- add_image(tag, img, step, walltime, dataformats = 'CHW'): img float in [0, 1]
-- (scaled by 255 and truncated, as torch) or uint8; 1 channel becomes 3 (as torch)
local FORMATS = { CHW = { 2, 3, 1 }, HWC = { 1, 2, 3 }, HW = true }
function SummaryWriter:add_image(tag, img, ...)
  local fn = 'add_image'
  local o = options.positional(fn, { 'global_step', 'walltime', 'dataformats' }, ...) or {}
  options.check(fn, o, { global_step = true, walltime = true, dataformats = 'string' })
  str_of(fn, 'tag', tag)
  local df = (o.dataformats or 'CHW'):upper()
  if not FORMATS[df] then fail(fn, ("dataformats must be 'CHW', 'HWC' or 'HW', got '%s'"):format(o.dataformats)) end
  if not is_tensor(img) then fail(fn, 'img_tensor must be a tensor, got ' .. typename(img)) end
  if img:dim() ~= #df then fail(fn, ('img_tensor must have %d dims for dataformats %s, got %d'):format(#df, df, img:dim())) end
  local x = host(img:detach())
  if df == 'HW' then x = x:unsqueeze(3) else x = x:permute(unpack(FORMATS[df])) end
  local c = x:size(3)
  if c == 1 then x = x:expand(x:size(1), x:size(2), 3) end
  if c ~= 1 and c ~= 3 and c ~= 4 then fail(fn, ('img_tensor must have 1, 3 or 4 channels, got %d'):format(c)) end
  if x:numel() == 0 then fail(fn, 'img_tensor is empty') end
  if x.dtype ~= 'uint8' then x = x:to('float32'):mul(255):to('uint8') end
  add(self:_file_writer(), S.image(fn, tag, x:contiguous()), step_of(fn, o.global_step), walltime_of(fn, o.walltime))
end

-- Python's str(float) for the default run name (the shortest repr that reads back)
local function pyfloat(x)
  for p = 15, 17 do
    local s = ('%.' .. p .. 'g'):format(x)
    if tonumber(s) == x then return s:find('[.e]') and s or s .. '.0' end
  end
end

-- add_hparams(hparam_dict, metric_dict, hparam_domain_discrete, run_name): the
-- hparams plugin's three summaries and each metric as a scalar, in a new
-- writer at log_dir/run_name (default the time). Values: numbers, strings,
-- booleans (numbers 1/0, as torch 1.13 logs them) or one-element tensors.
function SummaryWriter:add_hparams(hparam_dict, metric_dict, ...)
  local fn = 'add_hparams'
  local o = options.positional(fn, { 'hparam_domain_discrete', 'run_name' }, ...) or {}
  options.check(fn, o, { hparam_domain_discrete = 'table', run_name = 'string' })
  local keys = sorted_keys(fn, 'hparam_dict', hparam_dict)
  local mkeys = sorted_keys(fn, 'metric_dict', metric_dict)
  local hp, used = {}, {}
  local function hval(k, v, what)
    if type(v) == 'boolean' then return v and 1 or 0 end
    if type(v) == 'string' or type(v) == 'number' then return v end
    if is_tensor(v) then return v:reshape(-1)[1]:item() end
    fail(fn, ('%s must be a number, string, boolean or tensor, got %s'):format(what, typename(v)))
  end
  for _, k in ipairs(keys) do
    hp[k] = hval(k, hparam_dict[k], ("hparam_dict['%s']"):format(k))
    used[#used + 1] = k
  end
  local domains = {}
  for _, k in ipairs(o.hparam_domain_discrete and sorted_keys(fn, 'hparam_domain_discrete', o.hparam_domain_discrete) or {}) do
    local d = o.hparam_domain_discrete[k]
    if hp[k] == nil or type(d) ~= 'table' or is_tensor(d) then
      fail(fn, ("hparam_domain_discrete['%s'] must be a list of values of hparam_dict['%s']"):format(k, k))
    end
    domains[k] = {}
    for i, v in ipairs(d) do
      if type(v) ~= type(hparam_dict[k]) then fail(fn, ("hparam_domain_discrete['%s'] holds a %s, hparam_dict['%s'] is a %s"):format(k, typename(v), k, typename(hparam_dict[k]))) end
      domains[k][i] = hval(k, v, ("hparam_domain_discrete['%s'][%d]"):format(k, i))
    end
  end
  local metrics = {}
  for i, k in ipairs(mkeys) do metrics[i] = number_of(fn, ("metric_dict['%s']"):format(k), metric_dict[k]) end
  local exp, ssi, sei = S.hparams(used, hp, mkeys, domains)
  local w = SummaryWriter.new { log_dir = self:_file_writer().log_dir .. '/' .. (o.run_name or pyfloat(EF.time())) }
  for _, s in ipairs { exp, ssi, sei } do add(w.file_writer, s) end
  for i, k in ipairs(mkeys) do w:add_scalar(k, metrics[i]) end
  w:close()
end

function SummaryWriter:flush()
  if not self.all_writers then return end
  for _, w in pairs(self.all_writers) do w:flush() end
end

-- close: flush and close every file; a later add_* starts a new file (as torch)
function SummaryWriter:close()
  if not self.all_writers then return end
  for _, w in pairs(self.all_writers) do w:close() end
  self.file_writer, self.all_writers = nil, nil
end

function SummaryWriter:__tostring()
  return ('SummaryWriter(log_dir=%s%s)'):format(self.log_dir, self.all_writers and '' or ', closed')
end

local M = { SummaryWriter = setmetatable({ new = SummaryWriter.new },
  { __call = function(_, ...) return SummaryWriter.new(...) end }) }
M.proto, M.event_file = P, EF
return M
