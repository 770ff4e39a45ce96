-- lunet.parallel.simulate against a published scaling table: Horovod
-- (Sergeev & Del Balso 2018, arXiv:1802.05799; the Horovod README): 128
-- servers of 4 Pascal (P100) GPUs, a 25 Gbit/s RoCE network, TensorFlow
-- benchmarks at 64 images a GPU; at 512 GPUs 90% of linear scaling for
-- Inception V3 and ResNet-101, 68% for VGG-16.
--   luajit bench/simulate_published.lua
-- Inputs (given, not measured here): gradient bytes = parameters x 4
-- (Inception V3 23.9 M, ResNet-101 44.5 M, VGG-16 138.4 M); one P100's
-- training speed at batch 64 (images/s, assumed from TensorFlow's published
-- P100 benchmarks of the time: 142, 130, 150; the paper does not print them);
-- backward 2/3 of a step; a ring step's latency 5 us; each model's
-- parameters spread evenly over 50 layers (VGG-16's really lie mostly in its
-- last layers, whose gradients come first: the even spread is pessimistic
-- about overlap for it). The ring runs at the network's 25 Gbit/s
-- (3.125 GB/s); --busbw B gives another figure (GB/s), e.g. what NCCL reached
-- over TCP/RoCE at the time rather than the line rate.
package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
local lunet = require 'lunet'

local args = {}
for i = 1, #arg do
  local k = arg[i]:match('^%-%-(.+)')
  if k then args[k] = arg[i + 1] end
end
local BW = (tonumber(args.busbw) or 3.125) * 1e9
local LAT = tonumber(args.latency) or 5e-6

local models = {
  { name = 'Inception V3', params = 23.9e6, img_s = 142, published = 0.90 },
  { name = 'ResNet-101', params = 44.5e6, img_s = 130, published = 0.90 },
  { name = 'VGG-16', params = 138.4e6, img_s = 150, published = 0.68 },
}

print(('Horovod at 512 P100 GPUs (25 Gbit/s RoCE): simulate with bandwidth %.3g GB/s, latency %g s'):format(BW / 1e9, LAT))
print(('%-13s %12s %10s %10s %10s %10s %10s'):format('model', 'grad MB', 'step ms', 'eff 8', 'eff 512', 'published', 'error'))
for _, m in ipairs(models) do
  local d = { compute = 64 / m.img_s, backward = 2 / 3, model_bytes = m.params * 4, batch = 64, layers = 50 }
  local rows = lunet.parallel.simulate(d, { devices = { 8, 512 }, bandwidth = BW, latency = LAT, overlap = 1 })
  local e = rows[2].efficiency
  print(('%-13s %12.1f %10.1f %9.1f%% %9.1f%% %9.0f%% %+9.1f pt'):format(m.name, m.params * 4 / 1e6,
    rows[2].step * 1e3, rows[1].efficiency * 100, e * 100, m.published * 100, (e - m.published) * 100))
end
