-- lunet.repl: the interactive session behind bin/lunet. LuaJIT with lunet
-- loaded; each line's values are printed (tensors through tostring), both
-- `expr` and `=expr` work, statements too, unfinished input continues on the
-- next line, errors print and the loop goes on. GNU readline (through the
-- FFI) gives line editing, Tab completion of globals, fields and tensor
-- methods, and a history kept in ~/.lunet_history ($LUNET_HISTORY names
-- another file); without readline (or a terminal, or with LUNET_NO_READLINE
-- set) lines come from io.read. Ctrl-C drops the line being typed, or
-- interrupts running Lua code ("interrupted!"); Ctrl-D quits.
local ffi = require 'ffi'
local is_table = require('lunet.core').is_table   -- (a table, not a tensor)

local M = {}

local HISTORY_MAX = 1000

-- ---- readline through the FFI ---------------------------------------------------------

-- each declaration on its own: another module may have declared one already
local function declare()
  for _, d in ipairs({
    'char *readline(const char *prompt);', 'void add_history(const char *line);',
    'int read_history(const char *file);', 'int write_history(const char *file);',
    'int append_history(int n, const char *file);', 'int history_truncate_file(const char *file, int keep);',
    'extern char *(*rl_completion_entry_function)(const char *text, int state);',
    'extern const char *rl_basic_word_break_characters;', 'extern const char *rl_completer_word_break_characters;',
    'extern int rl_completion_append_character;', 'extern const char *rl_readline_name;',
    'void rl_callback_handler_install(const char *prompt, void (*handler)(char *line));',
    'void rl_callback_read_char(void);', 'void rl_callback_handler_remove(void);',
    'int rl_bind_key(int key, int (*fn)(int count, int key));', 'void rl_redisplay(void);',
    'extern int rl_done;', 'extern int rl_point;', 'extern int rl_end;', 'extern int rl_catch_signals;',
    'char *strdup(const char *s);', 'void free(void *p);', 'int isatty(int fd);',
    'struct lnrl_pollfd { int fd; short events; short revents; };',
    'int poll(struct lnrl_pollfd *fds, unsigned long n, int timeout);',
    'struct lnrl_termios { unsigned int iflag, oflag, cflag, lflag; unsigned char line, cc[32];'
      .. ' unsigned int ispeed, ospeed; };',
    'int tcgetattr(int fd, struct lnrl_termios *t);',
    'int tcsetattr(int fd, int when, const struct lnrl_termios *t);',
    'int sigaction(int sig, const void *act, void *old);',
  }) do pcall(ffi.cdef, d) end
end

local function load_readline()
  if os.getenv('LUNET_NO_READLINE') then return nil end
  declare()
  for _, name in ipairs({ 'libreadline.so.8', 'readline', 'libreadline.so' }) do
    local ok, lib = pcall(ffi.load, name)
    if ok then return lib end
  end
  return nil
end

-- ---- showing values ------------------------------------------------------------------

local function is_ident(s) return type(s) == 'string' and s:match('^[%a_][%w_]*$') ~= nil end

local function repr(v, depth)
  local tv = type(v)
  if tv == 'string' then return depth > 0 and ('%q'):format(v):gsub('\\\n', '\\n') or v end
  if tv ~= 'table' then return tostring(v) end
  local mt = getmetatable(v)
  if mt and mt.__tostring then return tostring(v) end
  if depth >= 2 then return tostring(v) end
  local parts, n = {}, #v
  for i = 1, math.min(n, 20) do parts[#parts + 1] = repr(v[i], depth + 1) end
  if n > 20 then parts[#parts + 1] = '...' end
  local keys = {}
  for k in pairs(v) do
    if not (type(k) == 'number' and k % 1 == 0 and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for i, k in ipairs(keys) do
    if i > 20 then parts[#parts + 1] = '...'; break end
    local key = is_ident(k) and k or ('[' .. repr(k, depth + 1) .. ']')
    parts[#parts + 1] = key .. ' = ' .. repr(v[k], depth + 1)
  end
  return '{' .. table.concat(parts, ', ') .. '}'
end

local function show(n, ...)
  if n == 0 then return end
  local out = {}
  for i = 1, n do out[i] = repr((select(i, ...)), 0) end
  io.write(table.concat(out, '\t'), '\n')
end

-- ---- completion ---------------------------------------------------------------------

local function safe_index(v, k)
  local ok, r = pcall(function() return v[k] end)
  if ok then return r end
end

-- names reachable from v with '.' (fields) or ':' (methods only)
local function candidates(v, colon, lunet)
  local names, seen = {}, {}
  local function add(k, val)
    if is_ident(k) and not seen[k] and (not colon or type(val) == 'function') then
      seen[k] = true; names[#names + 1] = k
    end
  end
  local function add_table(t, guard)
    if not is_table(t) or guard > 4 then return end
    for k, val in pairs(t) do add(k, val) end
    local mt = getmetatable(t)
    if is_table(mt) and is_table(mt.__index) then add_table(mt.__index, guard + 1) end
  end
  if is_table(v) then
    add_table(v, 0)
    if v == lunet then   -- lazily loaded submodules and the functional forms
      for _, m in ipairs(M.submodules()) do add(m, {}) end
      for k, val in pairs(lunet.Tensor) do
        if type(k) == 'string' and k:sub(-1) ~= '_' then add(k, val) end  -- not the in-place ones
      end
    end
  elseif lunet and lunet.is_tensor(v) then
    add_table(lunet.Tensor, 0)
    if not colon then add_table(require('lunet.tensor').getters, 0) end
  elseif type(v) == 'string' then
    add_table(string, 0)
  end
  return names
end

-- Completions of `text` (e.g. "lunet.ze", "t:tr", "pri") in env.
function M.complete(text, env, lunet)
  local head, sep, part = text:match('^(.-)([%.:]?)([%w_]*)$')
  if not head then return {} end
  local v = env
  if sep ~= '' then
    if head == '' then return {} end
    for piece, s in (head .. '.'):gmatch('([^%.:]*)([%.:])') do
      if not is_ident(piece) or (s == ':') then return {} end
      v = safe_index(v, piece)
      if v == nil then return {} end
    end
  elseif head ~= '' then
    return {}
  end
  local out = {}
  local list = sep == '' and candidates(env, false, nil) or candidates(v, sep == ':', lunet)
  if sep == '' then
    for _, kw in ipairs({ 'and', 'break', 'do', 'else', 'elseif', 'end', 'false', 'for', 'function',
      'goto', 'if', 'in', 'local', 'nil', 'not', 'or', 'repeat', 'return', 'then', 'true', 'until', 'while' }) do
      list[#list + 1] = kw
    end
    local g = getmetatable(env)
    if g and is_table(g.__index) then
      for _, k in ipairs(candidates(g.__index, false, nil)) do list[#list + 1] = k end
    end
  end
  local seen = {}
  for _, name in ipairs(list) do
    if name:sub(1, #part) == part and not seen[name] then
      seen[name] = true
      out[#out + 1] = head .. sep .. name
    end
  end
  table.sort(out)
  return out
end

-- lunet/*.lua and lunet/*/ next to this file: the submodules lunet loads on use
local submodule_cache
function M.submodules()
  if submodule_cache then return submodule_cache end
  submodule_cache = {}
  local dir = debug.getinfo(1, 'S').source:match('^@(.*)[/\\]repl%.lua$')
  if dir then
    local p = io.popen('ls "' .. dir .. '" 2>/dev/null')
    if p then
      for name in p:lines() do
        local m = name:match('^([%a_][%w_]*)%.lua$') or name:match('^([%a_][%w_]*)$')
        if m and m ~= 'init' and m ~= 'cdef' and m ~= 'core' then submodule_cache[#submodule_cache + 1] = m end
      end
      p:close()
    end
  end
  return submodule_cache
end

-- ---- reading lines -------------------------------------------------------------------

local function history_path()
  local home = os.getenv('HOME')
  if os.getenv('LUNET_HISTORY') then return os.getenv('LUNET_HISTORY') end
  return home and home ~= '' and (home .. '/.lunet_history') or nil
end

-- A line reader: readline when present and stdin is a terminal, else io.read.
local function make_reader(env, lunet)
  local hist = history_path()
  local lib = load_readline()
  if lib and ffi.C.isatty(0) == 1 then
    lib.rl_readline_name = 'lunet'
    local breaks = ffi.new('char[?]', 32, ' \t\n"\\\'><=;+-*/%^~#{}()[],')
    lib.rl_basic_word_break_characters = breaks
    lib.rl_completer_word_break_characters = breaks
    local matches
    local gen = ffi.cast('char *(*)(const char *, int)', function(text, state)
      if state == 0 then
        lib.rl_completion_append_character = 0
        local ok, list = pcall(M.complete, ffi.string(text), env, lunet)
        matches = ok and list or {}
      end
      local m = matches[state + 1]
      if m == nil then return nil end
      return ffi.C.strdup(m)
    end)
    lib.rl_completion_entry_function = gen
    if hist then
      if lib.read_history(hist) ~= 0 then lib.write_history(hist) end
    end
    -- Lines come through readline's callback interface, so that Ctrl-C at
    -- the prompt is a key (the terminal's ISIG is off while waiting) that
    -- drops the line, as in Python, instead of a signal.
    lib.rl_catch_signals = 0
    local line, done, interrupted
    local handler = ffi.cast('void (*)(char *)', function(p)
      done = true
      if p ~= nil then line = ffi.string(p); ffi.C.free(p) else line = nil end
      lib.rl_callback_handler_remove()
    end)
    local ctrl_c = ffi.cast('int (*)(int, int)', function()
      interrupted = true
      lib.rl_point = lib.rl_end
      lib.rl_redisplay()
      lib.rl_done = 1
      return 0
    end)
    lib.rl_bind_key(3, ctrl_c)
    local fds = ffi.new('struct lnrl_pollfd[1]')
    local tio, raw = ffi.new('struct lnrl_termios'), ffi.new('struct lnrl_termios')
    local function no_isig(t)
      t.lflag = bit.band(t.lflag, bit.bnot(1))   -- ISIG
      ffi.C.tcsetattr(0, 0, t)
    end
    local function read(prompt)
      done, line, interrupted = false, nil, false
      -- ISIG off before readline saves the settings (it restores them after
      -- the line), again once it has set its own, and back on at the end
      local have_tio = ffi.C.tcgetattr(0, tio) == 0
      if have_tio then ffi.copy(raw, tio, ffi.sizeof(tio)); no_isig(raw) end
      local ok, err = pcall(function()
        lib.rl_callback_handler_install(prompt, handler)
        if have_tio and ffi.C.tcgetattr(0, raw) == 0 then no_isig(raw) end
        while not done do
          fds[0].fd, fds[0].events, fds[0].revents = 0, 1, 0
          local n = ffi.C.poll(fds, 1, -1)
          if n > 0 then
            if bit.band(fds[0].revents, 32) ~= 0 then lib.rl_callback_handler_remove(); break end  -- POLLNVAL
            lib.rl_callback_read_char()
          end
        end
      end)
      if not ok and not done then lib.rl_callback_handler_remove() end
      if have_tio then ffi.C.tcsetattr(0, 0, tio) end
      if not ok then error(err, 0) end
      if interrupted then io.write('^C\n'); return false end
      return line
    end
    jit.off(read, true)
    local function remember(line)
      lib.add_history(line)
      if hist then
        if lib.append_history(1, hist) ~= 0 then lib.write_history(hist) end
        lib.history_truncate_file(hist, HISTORY_MAX)
      end
    end
    return read, remember, { breaks, gen, handler, ctrl_c }, true   -- (anchors)
  end
  local tty = ffi.C.isatty(0) == 1
  local function read(prompt)
    if tty then io.write(prompt); io.flush() end
    return io.read('*l')
  end
  local function remember(line)   -- (piped input is not history)
    if not hist or not tty then return end
    local f = io.open(hist, 'a')
    if f then f:write(line, '\n'); f:close() end
  end
  return read, remember, {}, tty
end

-- ---- the loop --------------------------------------------------------------------------

-- Compile one input: '=expr' and 'expr' print their values; else a statement.
-- Returns fn, or nil and the error, and whether more input could complete it.
-- Each input is its own chunk, so a `local` typed at the prompt would be gone
-- by the next line: a leading `local x = ...` / `local function f` is kept as
-- a global instead (lines pasted from a script then work as typed).
function M.compile(src)
  local code = src:gsub('^%s*=', 'return ', 1)
  code = code:gsub('^(%s*)local%s+function(%s)', '%1function%2', 1)
  code = code:gsub('^(%s*)local%s+([%a_][%w_]*%s*,?[%w_%s,]*=)', '%1%2', 1)
  local f = loadstring('return ' .. code, '=stdin')
  if f then return f end
  local err
  f, err = loadstring(code, '=stdin')
  if f then return f end
  return nil, err, err:find('<eof>', 1, true) ~= nil
end

-- `exit()` (and exit(code)) leaves the loop through this error value
local EXIT = setmetatable({}, { __tostring = function() return 'exit' end })

-- An error as the user should see it: no position inside the REPL itself (an
-- error raised a level above the typed line lands there), and none inside
-- lunet's files before a named error ("view: shape {5} is invalid ...");
-- a raw Lua error inside lunet keeps its position (it is a bug to report).
function M.clean_error(msg)
  msg = msg:gsub('^[^\n]-lunet[/\\]repl%.lua:%d+: ', '', 1)
  msg = msg:gsub('^[^\n]-lunet[/\\][%w_/\\]+%.lua:%d+: ([%a_][%w_.:]*: )', '%1', 1)
  return msg
end

local function traceback(msg)
  if msg == EXIT then return msg end
  if type(msg) ~= 'string' then msg = repr(msg, 0) end
  return M.clean_error(msg)
end

M.help_text = [[
lunet: LuaJIT with lunet loaded (as `lunet`, with `nn` and `optim`).
  lunet.tensor{{1, 2}, {3, 4}}   lunet.randn(2, 3)   x:size()   x[{1, 2}]
  Type an expression to see its value (`=expr` too); statements run as typed.
  help(x)  lists the fields and methods of x (a module, a tensor, a table)
  Tab completes names; history is kept in ~/.lunet_history.
  exit, exit() or Ctrl-D quits; Ctrl-C drops the line or stops running code.
  README.md has the tour and a table for PyTorch users.]]

-- help(): the text above; help(x): the names x offers, sorted
local function help(x, lunet)
  if x == nil then io.write(M.help_text, '\n'); return end
  local names
  if type(x) == 'string' then io.write(x, ': a string (see Lua\'s string library)\n'); return end
  names = candidates(x, false, lunet)
  table.sort(names)
  local what = lunet.is_tensor(x) and 'tensor methods and fields' or type(x)
  io.write(('%s (%d names):\n'):format(what, #names))
  local line = ' '
  for _, n in ipairs(names) do
    if #line + #n > 78 then io.write(line, '\n'); line = ' ' end
    line = line .. ' ' .. n
  end
  io.write(line, '\n')
end

local function pack(...) return select('#', ...), { ... } end

function M.run(opts)
  opts = require('lunet.options').check('repl.run', opts, { env = 'table', quiet = 'boolean' }) or {}
  declare()
  local lunet = require 'lunet'
  local env = opts.env or _G
  rawset(env, 'lunet', lunet)
  rawset(env, 'nn', safe_index(lunet, 'nn'))
  rawset(env, 'optim', safe_index(lunet, 'optim'))
  -- as in Python's REPL: exit() quits and help() helps; the bare words do the same here
  local exit_fn = function(code) M.exit_code = tonumber(code) or 0; error(EXIT, 0) end
  local help_fn = function(x) return help(x, lunet) end
  rawset(env, 'exit', exit_fn)
  rawset(env, 'quit', exit_fn)
  rawset(env, 'help', help_fn)
  local read, remember, anchors, tty = make_reader(env, lunet)
  M._anchors = anchors
  if tty and not opts.quiet then
    io.write(('lunet %s on %s (%s) -- devices: %s -- help, exit\n'):format(lunet.version, jit.version,
      jit.arch, table.concat(lunet.devices(), ' ')))
  end
  -- While code runs, Ctrl-C is SIGINT: luajit's own handler (saved here and
  -- re-armed before each evaluation, as it disarms itself) makes the running
  -- Lua code raise "interrupted!". A tight JIT-compiled loop may not see it.
  local sigint = ffi.new('char[256]')
  local have_sigint = ffi.C.sigaction(2, nil, sigint) == 0
  local buffer
  local function step()
    local line = read(buffer and '  ...> ' or 'lunet> ')
    if line == nil then return true end
    if line == false then buffer = nil; return end      -- Ctrl-C at the prompt
    local src = buffer and (buffer .. '\n' .. line) or line
    if not src:match('%S') then return end
    local word = not buffer and src:match('^%s*([%a_]+)%s*$')
    if word and rawget(env, word) == exit_fn then remember(src); return true end
    if word and rawget(env, word) == help_fn then remember(src); help(nil, lunet); return end
    local f, err, more = M.compile(src)
    if not f and more then buffer = src; return end
    buffer = nil
    remember((src:gsub('\n', ' ')))
    if not f then io.write(err, '\n'); return end
    setfenv(f, env)
    if have_sigint then ffi.C.sigaction(2, sigint, nil) end
    local n, res = pack(xpcall(f, traceback))
    if res[2] == EXIT then return true end
    if res[1] then
      show(n - 1, unpack(res, 2, n))
      if n > 1 then rawset(env, '_', res[2]) end
    else
      io.write(tostring(res[2]), '\n')
    end
  end
  while true do
    local ok, stop = pcall(step)   -- (an interrupt may land in the loop's own code)
    if not ok then io.write(M.clean_error(tostring(stop)), '\n'); buffer = nil
    elseif stop then
      if tty then io.write('\n') end
      break
    end
    io.flush()
  end
  return M.exit_code or 0
end
jit.off(M.run, true)

return M
