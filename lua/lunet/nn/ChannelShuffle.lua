-- nn.ChannelShuffle(groups): the C channels of (N, C, *) input taken as
-- groups x C/groups and transposed (ShuffleNet), as torch's
local Module = require 'lunet.nn.Module'
local F = require 'lunet.nn.functional'
local options = require 'lunet.options'

local ChannelShuffle = Module:extend('nn.ChannelShuffle')

function ChannelShuffle:__init(groups, ...)
  if type(groups) ~= 'number' or groups % 1 ~= 0 or groups < 1 or groups >= 2 ^ 31 then
    options.fail('nn.ChannelShuffle', 'groups must be an integer >= 1, got ' .. tostring(groups))
  end
  if select('#', ...) > 0 then options.fail('nn.ChannelShuffle', 'takes groups only') end
  self.groups = groups
end

function ChannelShuffle:forward(x) return F.channel_shuffle(x, self.groups) end

function ChannelShuffle:extra_repr() return 'groups ' .. self.groups end

return ChannelShuffle
