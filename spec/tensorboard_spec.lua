-- lunet.utils.tensorboard (SummaryWriter) against torch 1.13's: the event
-- files of spec/fixtures/tensorboard.safetensors (tools/gen_tensorboard_fixtures.py,
-- written with time.time fixed) are rewritten by lunet with the same clock and
-- compared record by record, byte for byte (histograms: sum and sum_squares to
-- 1e-12, numpy sums pairwise; images: the fields, and lunet's PNG decoded to
-- the pixels PIL wrote). Then CRC32C vectors, the reader's CRC checks, the
-- queue/flush/close/gc semantics and the errors.
local ffi = require 'ffi'
local lunet = require 'lunet'
local fixtures = require 'support.fixtures'
local tb = require 'lunet.utils.tensorboard'
local P = require 'lunet.utils.tensorboard.proto'
local EF = require 'lunet.utils.tensorboard.event_file'
local SummaryWriter = tb.SummaryWriter

local fx, cases = fixtures.load_fixture('tensorboard')
local FIXED_TIME = 1700000000.25

local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok, 'no error')
  return tostring(e)
end

local function bytes_of(t) return ffi.string(t:contiguous():data_ptr(), t:numel()) end
local function slurp(path)
  local f = assert(io.open(path, 'rb'))
  local s = f:read('*a')
  f:close()
  return s
end
local function tmpdir()
  local n = os.tmpname()
  os.remove(n)
  return n .. '.tb'
end
local function files_under(dir)   -- relative paths of the event files, sorted
  local out = {}
  local p = io.popen(("find '%s' -type f -name 'events.out.tfevents.*' | sort"):format(dir))
  for line in p:lines() do out[#out + 1] = line:sub(#dir + 2) end
  p:close()
  return out
end
local function records_of(path) return P.records(slurp(path), path) end

-- ---- an Event's parts that may differ from torch's, taken out ----
local function encode(fields)
  local t = {}
  for _, f in ipairs(fields) do
    local k = P.raw_varint(f[1] * 8 + f[2])
    if f[2] == 0 then t[#t + 1] = k .. P.raw_varint(f[3])
    elseif f[2] == 2 then t[#t + 1] = k .. P.raw_varint(#f[3]) .. f[3]
    else t[#t + 1] = k .. f[3] end
  end
  return table.concat(t)
end
-- normalize(event) -> the event without PNG bytes and histogram sums, the PNGs, the sums
local function normalize(ev)
  local pngs, sums = {}, {}
  local e = P.decode(ev)
  for _, f in ipairs(e) do
    if f[1] == 5 then
      local s = P.decode(f[3])
      for _, v in ipairs(s) do
        local val = P.decode(v[3])
        for _, x in ipairs(val) do
          if x[1] == 4 then   -- Image: height, width, colorspace kept, encoded_image_string out
            local img, keep = P.decode(x[3]), {}
            for _, y in ipairs(img) do if y[1] == 4 then pngs[#pngs + 1] = y[3] else keep[#keep + 1] = y end end
            x[3] = encode(keep)
          elseif x[1] == 5 then   -- HistogramProto: sum (4), sum_squares (5) out
            local h, keep = P.decode(x[3]), {}
            for _, y in ipairs(h) do if y[1] == 4 or y[1] == 5 then sums[#sums + 1] = P.to_double(y[3]) else keep[#keep + 1] = y end end
            x[3] = encode(keep)
          end
        end
        v[3] = encode(val)
      end
      f[3] = encode(s)
    end
  end
  return encode(e), pngs, sums
end

-- the pixels of a PNG lunet wrote (filter 0 rows; chunk CRCs checked with zlib's crc32)
ffi.cdef [[ int uncompress(uint8_t *dest, unsigned long *destLen, const uint8_t *source, unsigned long sourceLen); ]]
local function png_pixels(png)
  local z = require('lunet.utils.tensorboard.summary').zlib('spec')
  assert.are.equal('\137PNG\r\n\26\n', png:sub(1, 8))
  local pos, idat, w, h, c = 9, {}, nil, nil, nil
  local function be32(s) local a, b, cc, d = s:byte(1, 4); return ((a * 256 + b) * 256 + cc) * 256 + d end
  while pos <= #png do
    local n, kind = be32(png:sub(pos, pos + 3)), png:sub(pos + 4, pos + 7)
    local body = png:sub(pos + 4, pos + 7 + n)
    assert.are.equal(be32(png:sub(pos + 8 + n, pos + 11 + n)), tonumber(z.crc32(0, body, #body)))
    if kind == 'IHDR' then w, h, c = be32(body:sub(5, 8)), be32(body:sub(9, 12)), body:byte(14) == 6 and 4 or 3 end
    if kind == 'IDAT' then idat[#idat + 1] = body:sub(5) end
    pos = pos + 12 + n
  end
  local data = table.concat(idat)
  local len = ffi.new('unsigned long[1]', h * (w * c + 1))
  local out = ffi.new('uint8_t[?]', len[0])
  assert.are.equal(0, z.uncompress(out, len, data, #data))
  local rows = {}
  for y = 0, h - 1 do
    assert.are.equal(0, out[y * (w * c + 1)])
    rows[#rows + 1] = ffi.string(out + y * (w * c + 1) + 1, w * c)
  end
  return table.concat(rows)
end

local function value_of(case, a)
  if type(a) == 'string' and a:sub(1, 1) == '@' then return fx[case.name .. '.' .. a:sub(2)] end
  if type(a) == 'table' and a.float then return ({ nan = 0 / 0, inf = math.huge, ['-inf'] = -math.huge })[a.float] end
  return a
end

local real_time = EF.time
local function replay(case, dir)
  EF.time = function() return FIXED_TIME end
  local ok, err = pcall(function()
    local opts = { log_dir = dir }
    for k, v in pairs(case.writer) do opts[k] = v end
    local w = SummaryWriter(opts)
    for _, call in ipairs(case.calls) do
      local args = {}
      for i, a in ipairs(call[2]) do args[i] = value_of(case, a) end
      local kw = {}
      for k, v in pairs(call[3]) do kw[k] = value_of(case, v) end
      args[#args + 1] = kw
      w[call[1]](w, unpack(args, 1, #call[2] + 1))
    end
    w:close()
  end)
  EF.time = real_time
  assert(ok, err)
end

describe('SummaryWriter against torch 1.13', function()
  for _, case in ipairs(cases) do
    it(case.name, function()
      local dir = tmpdir()
      replay(case, dir)
      local got = files_under(dir)
      assert.are.equal(#case.files, #got)
      local nimg = 0
      for i, key in ipairs(case.files) do
        assert.are.equal(key, got[i]:match('^(.*events%.out%.tfevents)%.'))   -- the same sub-directories
        assert.is_truthy(got[i]:match('%.tfevents%.1700000000%.[^/]+%.%d+%.%d+' .. ((case.writer.filename_suffix or ''):gsub('%.', '%%.')) .. '$'))
        local want, have = P.records(bytes_of(fx[case.name .. '|' .. key])), records_of(dir .. '/' .. got[i])
        assert.are.equal(#want, #have)
        for r = 1, #want do
          if want[r] ~= have[r] then
            local wn, _, ws = normalize(want[r])
            local hn, hp, hs = normalize(have[r])
            assert.are.equal(wn, hn, ('%s record %d'):format(key, r))
            assert.are.equal(#ws, #hs)
            for j = 1, #ws do assert.is_true(math.abs(ws[j] - hs[j]) <= 1e-12 * math.abs(ws[j]), 'histogram sums') end
            for _, png in ipairs(hp) do
              assert.are.equal(bytes_of(fx[case.name .. '.pixels' .. nimg]), png_pixels(png))
              nimg = nimg + 1
            end
          end
        end
      end
      os.execute("rm -rf '" .. dir .. "'")
    end)
  end
end)

describe('TFRecord framing', function()
  it('CRC32C (Castagnoli) known vectors and the mask', function()
    assert.are.equal(0xE3069283, P.crc32c('123456789'))
    assert.are.equal(0, P.crc32c(''))
    assert.are.equal(0x8A9136AA, P.crc32c(('\0'):rep(32)))
    assert.are.equal(0x62A8AB43, P.crc32c(('\255'):rep(32)))
    local c = P.crc32c('abc')
    assert.are.equal(((math.floor(c / 2 ^ 15) + (c * 2 ^ 17) % 2 ^ 32) + 0xa282ead8) % 2 ^ 32, P.masked_crc('abc'))
  end)
  it('the reader checks every CRC and the lengths', function()
    local rec = P.record('hello') .. P.record('')
    assert.are.same({ 'hello', '' }, P.records(rec))
    for _, at in ipairs { 1, 9, 14, 18 } do   -- length, its CRC, the data, the data's CRC
      local bad = rec:sub(1, at - 1) .. string.char((rec:byte(at) + 1) % 256) .. rec:sub(at + 1)
      assert.is_truthy(err_of(P.records, bad):match('bad .*CRC') or err_of(P.records, bad):match('truncated'))
    end
    assert.is_truthy(err_of(P.records, rec:sub(1, -2)):match('truncated'))
  end)
end)

describe('SummaryWriter semantics', function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it('queues max_queue events, flush and close write them, a closed writer starts a new file', function()
    local w = SummaryWriter(dir, { max_queue = 3 })
    local path = dir .. '/' .. files_under(dir)[1]
    assert.are.equal(1, #records_of(path))   -- the file_version event, at once
    w:add_scalar('a', 1, 1)
    w:add_scalar('a', 2, 2)
    assert.are.equal(1, #records_of(path))
    w:add_scalar('a', 3, 3)                  -- the third pending: written
    assert.are.equal(4, #records_of(path))
    w:add_text('t', 'x')
    w:flush()
    assert.are.equal(5, #records_of(path))
    w:add_scalar('a', 4, 4)
    w:close()
    w:close()                                -- (twice is fine, as torch)
    assert.are.equal(6, #records_of(path))
    assert.is_truthy(tostring(w):match('closed'))
    w:add_scalar('a', 5, 5)
    w:close()
    assert.are.equal(2, #files_under(dir))
    local ev = P.decode(records_of(path)[1])
    assert.are.equal('brain.Event:2', ev[2][3])
  end)
  it('flush_secs = 0 writes every event at once; a dropped writer writes its queue when collected', function()
    local w = SummaryWriter { log_dir = dir .. '/a', flush_secs = 0 }
    w:add_scalar('a', 1, 1)
    assert.are.equal(2, #records_of(dir .. '/a/' .. files_under(dir .. '/a')[1]))
    w = SummaryWriter { log_dir = dir .. '/b' }
    w:add_scalar('a', 1, 1)
    w:add_histogram('h', lunet.randn(3, 4):t(), 2)   -- (a non-contiguous view)
    w = nil
    collectgarbage(); collectgarbage()
    local recs = records_of(dir .. '/b/' .. files_under(dir .. '/b')[1])
    assert.are.equal(3, #recs)
  end)
  it('scalars: NaN, inf and 0-d tensors as torch; steps truncate as int()', function()
    local w = SummaryWriter(dir)
    w:add_scalar('nan', 0 / 0, 2.7)
    w:add_scalar('t', lunet.tensor(3.5))
    w:close()
    local recs = records_of(dir .. '/' .. files_under(dir)[1])
    local function value(r)   -- Event -> (step field, Summary.Value's fields)
      local ev = P.decode(r)
      return ev[2], P.decode(P.decode(ev[#ev][3])[1][3])
    end
    local step, v = value(recs[2])
    assert.are.same({ 2, 0, 2 }, step)
    assert.are.same({ { 1, 2, 'nan' }, { 2, 5, '\0\0\192\127' } }, v)   -- Python's NaN bits
    step, v = value(recs[3])
    assert.are.equal(5, step[1])   -- no step: the summary (5) follows the wall time
    assert.are.equal(3.5, P.to_float(v[2][3]))
  end)
  it('default log_dir runs/<date>_<host><comment>, and __tostring', function()
    local w = SummaryWriter { comment = '_lunet_spec' }
    local d = w:get_logdir()
    assert.is_truthy(d:match('^runs/%a%a%a%d%d_%d%d%-%d%d%-%d%d_.*_lunet_spec$'))
    assert.is_truthy(tostring(w):match('^SummaryWriter%(log_dir=runs/'))
    w:close()
    os.execute("rm -rf '" .. d .. "'")
    os.remove('runs')   -- (only when empty)
  end)
  it('reachable as lunet.utils.tensorboard', function()
    assert.are.equal(tb, require('lunet').utils.tensorboard)
  end)
end)

describe('SummaryWriter errors', function()
  local dir, w
  setup(function() dir = tmpdir(); w = SummaryWriter(dir) end)
  teardown(function() w:close(); os.execute("rm -rf '" .. dir .. "'") end)
  it('unknown and ill-typed options', function()
    assert.is_truthy(err_of(SummaryWriter, { logdir = dir }):match("SummaryWriter: unknown option 'logdir' %(did you mean 'log_dir'%?%)"))
    assert.is_truthy(err_of(SummaryWriter, { log_dir = dir, max_queue = 0 }):match('SummaryWriter: max_queue must be an integer >= 1'))
    assert.is_truthy(err_of(SummaryWriter, { log_dir = 3 }):match("SummaryWriter: option 'log_dir' must be a string"))
    assert.is_truthy(err_of(w.add_scalar, w, 'a', 1, { step = 1 }):match("add_scalar: unknown option 'step'"))
    assert.is_truthy(err_of(w.add_histogram, w, 'a', lunet.randn(3), { bin = 3 }):match("add_histogram: unknown option 'bin' %(did you mean 'bins'%?%)"))
  end)
  it('bad values name the function and the problem', function()
    assert.is_truthy(err_of(w.add_scalar, w, 'a', 'x', 1):match('add_scalar: scalar_value must be a number or a one%-element tensor, got string'))
    assert.is_truthy(err_of(w.add_scalar, w, 'a', lunet.ones(2), 1):match('add_scalar: scalar_value must hold one element'))
    assert.is_truthy(err_of(w.add_scalar, w, 1, 1):match('add_scalar: tag must be a string'))
    assert.is_truthy(err_of(w.add_scalar, w, 'a', 1, 'one'):match('add_scalar: global_step must be an integer'))
    assert.is_truthy(err_of(w.add_scalar, w, 'a', 1, 0 / 0):match('add_scalar: global_step must be an integer'))
    assert.is_truthy(err_of(w.add_scalars, w, 'a', { x = 'y' }):match("add_scalars: tag_scalar_dict%['x'%] must be a number"))
    assert.is_truthy(err_of(w.add_histogram, w, 'h', lunet.zeros(0)):match('add_histogram: values has no element'))
    -- (raised at the caller's line, however deep in lunet.utils.tensorboard)
    assert.is_truthy(err_of(function() w:add_histogram('h', lunet.zeros(0)) end):match('^[^:]*tensorboard_spec%.lua:%d+: add_histogram'))
    assert.is_truthy(err_of(function() w:add_scalar('a', 'x') end):match('^[^:]*tensorboard_spec%.lua:%d+: add_scalar'))
    assert.is_truthy(err_of(w.add_histogram, w, 'h', { 1, 2 }):match('add_histogram: values must be a tensor'))
    assert.is_truthy(err_of(w.add_histogram, w, 'h', lunet.randn(3), 1, 0):match('add_histogram: bins must be an integer >= 1'))
    assert.is_truthy(err_of(w.add_histogram, w, 'h', lunet.randn(3), 1, 'auto'):match("add_histogram: bins must be 'tensorflow'"))
    assert.is_truthy(err_of(w.add_histogram, w, 'h', lunet.tensor({ 1, 0 / 0 }), 1, 5):match('add_histogram: the range of the values'))
    assert.is_truthy(err_of(w.add_histogram, w, 'h', lunet.tensor({ 5, 6 }), 1, { 0, 1 }):match('add_histogram: no value falls inside the bins'))
    assert.is_truthy(err_of(w.add_text, w, 't', 3):match('add_text: text_string must be a string'))
    assert.is_truthy(err_of(w.add_image, w, 'i', lunet.rand(2, 3, 3)):match('add_image: img_tensor must have 1, 3 or 4 channels, got 2'))
    assert.is_truthy(err_of(w.add_image, w, 'i', lunet.rand(3, 3)):match('add_image: img_tensor must have 3 dims for dataformats CHW, got 2'))
    assert.is_truthy(err_of(w.add_image, w, 'i', lunet.rand(3, 3, 3), 1, { dataformats = 'NCHW' }):match("add_image: dataformats must be"))
    assert.is_truthy(err_of(w.add_hparams, w, { lr = {} }, {}):match("add_hparams: hparam_dict%['lr'%] must be a number, string, boolean or tensor"))
    assert.is_truthy(err_of(w.add_hparams, w, { lr = 1 }, 3):match('add_hparams: metric_dict must be a table'))
    assert.is_truthy(err_of(w.add_hparams, w, { lr = 1 }, {}, { hparam_domain_discrete = { lr = { 'a' } } }):match("add_hparams: hparam_domain_discrete%['lr'%] holds a string"))
  end)
end)
