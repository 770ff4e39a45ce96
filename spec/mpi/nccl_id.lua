-- NCCL's unique id handed over MPI (lunet.distributed's bootstrap of nccl
-- communicators), without GPUs: every process of the world, and of a group
-- whose first process is not rank 0, gets the id its first process made.
local comm = require 'lunet.comm'
local dist = require 'lunet.distributed'
local info = dist.init{timeout = 30}
local r = info.rank
local ok, err = pcall(function()
  local w = comm.Communicator({ 'cpu:0' }, { backend = 'mpi' })
  print(('rank %d world %s'):format(r, dist._nccl_id(w, r + 1)))
  -- group {2, 0}: process 2 makes the id
  local members = { 2, 0 }
  for i, m in ipairs(members) do
    if m == r then
      local g = comm.Communicator({ 'cpu:0' }, { backend = 'mpi', rendezvous = '2,0' })
      print(('rank %d group %s'):format(r, dist._nccl_id(g, i)))
    end
  end
end)
if not ok then print(('rank %d FAIL %s'):format(r, tostring(err))) end
print(('rank %d done'):format(r))
dist.finalize()
