-- lunet.nn.rnn_steps (internal): one time step of each recurrent cell, as
-- PyTorch 1.13 computes it, composed from differentiable tensor ops so that
-- it runs (and differentiates) on every backend. gi is the input's
-- projection x W_ih^T + b_ih, (N, G*H); the layers compute it for all time
-- steps in one matmul before the loop, the cells per call.
local F = require 'lunet.nn.functional'

local M = {}

-- gate counts per mode (the rows of weight_ih are G*H)
M.GATES = { RNN_TANH = 1, RNN_RELU = 1, LSTM = 4, GRU = 3 }

-- h' = act(gi + h W_hh^T + b_hh)
function M.RNN_TANH(gi, h, w_hh, b_hh) return (gi + F.linear(h, w_hh, b_hh)):tanh() end
function M.RNN_RELU(gi, h, w_hh, b_hh) return (gi + F.linear(h, w_hh, b_hh)):relu() end

-- gates i, f, g, o (torch's order): c' = f c + i g, h' = o tanh(c'); returns h', c'.
-- With a projection w_hr (proj_size, H), h' = (o tanh(c')) w_hr^T.
function M.LSTM(gi, h, w_hh, b_hh, c, w_hr)
  local H = c:size(-1)
  local gates = gi + F.linear(h, w_hh, b_hh)
  local i_f = gates:narrow(-1, 1, 2 * H):sigmoid()   -- (i and f in one sigmoid)
  local g = gates:narrow(-1, 2 * H + 1, H):tanh()
  local o = gates:narrow(-1, 3 * H + 1, H):sigmoid()
  local c2 = i_f:narrow(-1, H + 1, H) * c + i_f:narrow(-1, 1, H) * g
  local h2 = o * c2:tanh()
  if w_hr then h2 = F.linear(h2, w_hr) end
  return h2, c2
end

-- gates r, z, n (torch's order): n = tanh(gi_n + r (h W_hn^T + b_hn)),
-- h' = (1 - z) n + z h, written n + z (h - n)
function M.GRU(gi, h, w_hh, b_hh)
  local H = h:size(-1)
  local gh = F.linear(h, w_hh, b_hh)
  local rz = (gi:narrow(-1, 1, 2 * H) + gh:narrow(-1, 1, 2 * H)):sigmoid()
  local n = (gi:narrow(-1, 2 * H + 1, H) + rz:narrow(-1, 1, H) * gh:narrow(-1, 2 * H + 1, H)):tanh()
  return n + rz:narrow(-1, H + 1, H) * (h - n)
end

-- {2, 3, 4} for error messages
function M.shape(t) return '{' .. table.concat(t:size(), ', ') .. '}' end

return M
