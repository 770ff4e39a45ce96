-- lunet.data.ImageFolder(root[, opts]) and DatasetFolder(root, {loader = f,
-- extensions = {...}}): torchvision 0.14's datasets over root/<class>/**/<file>.
--   classes: the sorted names of root's sub-folders; class_to_idx[name]: its
--   label, 1-based (lunet's CrossEntropyLoss and CIFAR10 count from 1);
--   samples: {path, label} in torchvision's order (each class's folders,
--   symlinks followed, sorted by path, their files sorted by name) of the
--   files whose lower-cased name ends in one of `extensions` (ImageFolder:
--   IMG_EXTENSIONS) or that is_valid_file(path) accepts (not both).
-- ds[i] / ds:get(i): the image read in mode RGB (PIL's convert('RGB'), as
-- torchvision's default loader), through `transform` (a data.transforms
-- transform, its random choices keyed by seed 0, epoch 0 and i; or a Lua
-- function), and the label through target_transform. Without a transform
-- the image is float32 (C,H,W) in [0,1] (ToTensor, implicit as in lunet's
-- other image datasets). In a DataLoader the transform of each sample is
-- keyed by the loader's (seed, epoch, index), so images of different sizes
-- batch when the transforms end at one size; with the default loader, no
-- target_transform and a data.transforms transform (or none) the loader's C
-- workers read, decode and transform the files (see c_files).
local core = require 'lunet.core'
local is_table, typename = core.is_table, core.typename
local Dataset = require 'lunet.data.Dataset'
local transforms = require 'lunet.data.transforms'
local image = require 'lunet.data.image'
local options = require 'lunet.options'

local M = {}
M.IMG_EXTENSIONS = { '.jpg', '.jpeg', '.png', '.ppm', '.bmp', '.pgm', '.tif', '.tiff', '.webp' }

local function sorted_dirs(path)
  local out = {}
  for _, e in ipairs(image.list_dir(path)) do if e[2] then out[#out + 1] = e[1] end end
  table.sort(out)
  return out
end

-- os.walk(dir, followlinks=True) as (folder, files) pairs, sorted by folder
local function walk(dir, out, depth)
  local ok, entries = pcall(image.list_dir, dir)
  if not ok then return out end   -- (os.walk passes over a folder it cannot read)
  if depth > 64 then error(('ImageFolder: folders nest deeper than 64 at %s (a symlink loop?)'):format(dir), 0) end
  local files = {}
  out[#out + 1] = { dir, files }
  for _, e in ipairs(entries) do
    if e[2] then walk(dir .. '/' .. e[1], out, depth + 1) else files[#files + 1] = e[1] end
  end
  table.sort(files)
  return out
end

local function ends_with_any(name, exts)
  local low = name:lower()
  for _, x in ipairs(exts) do if #low >= #x and low:sub(-#x) == x:lower() then return true end end
  return false
end

local DatasetFolder = Dataset:extend('DatasetFolder')
local OPTS = { root = 'string', loader = 'function', extensions = 'table|string', transform = 'table|function',
  target_transform = 'function', is_valid_file = 'function' }

function DatasetFolder:__init(...)
  local fn = self.__name
  local opts = options.check(fn, options.positional(fn, { 'root' }, ...), OPTS) or {}
  local root = opts.root
  if type(root) ~= 'string' then error(fn .. ': root must be a string (the folder of class folders), got ' .. typename(root), 3) end
  root = root:gsub('(.)/+$', '%1')
  if opts.extensions ~= nil and opts.is_valid_file ~= nil then
    error(fn .. ': give extensions or is_valid_file, not both (as torchvision)', 3)
  end
  local exts = opts.extensions
  if type(exts) == 'string' then exts = { exts } end
  if exts == nil and opts.is_valid_file == nil then exts = self.default_extensions end
  if exts == nil and opts.is_valid_file == nil then error(fn .. ': needs extensions or is_valid_file', 3) end
  local valid = opts.is_valid_file or function(p) return ends_with_any(p, exts) end
  if opts.transform ~= nil and type(opts.transform) ~= 'function' then transforms.compile(opts.transform, 'uint8') end
  local ok, classes = pcall(sorted_dirs, root)
  if not ok then error(fn .. ': ' .. tostring(classes):gsub('^.-list_dir: ', ''), 3) end
  if #classes == 0 then error(("%s: Couldn't find any class folder in %s."):format(fn, root), 3) end
  local class_to_idx, samples, empty = {}, {}, {}
  for k, c in ipairs(classes) do
    class_to_idx[c] = k
    local found = false
    local dirs = walk(root .. '/' .. c, {}, 0)
    table.sort(dirs, function(a, b) return a[1] < b[1] end)
    for _, d in ipairs(dirs) do
      for _, f in ipairs(d[2]) do
        local p = d[1] .. '/' .. f
        if valid(p) then samples[#samples + 1] = { p, k }; found = true end
      end
    end
    if not found then empty[#empty + 1] = c end
  end
  if #empty > 0 then   -- (torchvision's FileNotFoundError)
    local msg = ('%s: Found no valid file for the classes %s. '):format(fn, table.concat(empty, ', '))
    if exts then msg = msg .. 'Supported extensions are: ' .. table.concat(exts, ', ') end
    error(msg, 3)
  end
  self.root, self.classes, self.class_to_idx, self.samples = root, classes, class_to_idx, samples
  self.targets = {}
  for i, s in ipairs(samples) do self.targets[i] = s[2] end
  self.imgs, self.extensions = samples, exts
  self.loader = opts.loader or function(p) return image.read_image(p, { mode = 'RGB' }) end
  self.default_loader = opts.loader == nil
  self.transform, self.target_transform = opts.transform, opts.target_transform
end

function DatasetFolder:__len() return #self.samples end

-- sample i through `tf` keyed by (seed, epoch, i): what get and the DataLoader use
function DatasetFolder:get_transformed(i, tf, seed, epoch)
  local n = #self.samples
  if type(i) ~= 'number' or i % 1 ~= 0 or i < 1 or i > n then
    error(('%s:get: index %s out of range 1..%d'):format(self.__name, tostring(i), n), 3)
  end
  local s = self.samples[i]
  local x = self.loader(s[1])
  if type(tf) == 'function' then x = tf(x)
  elseif tf ~= nil then x = tf(x, { key = i, seed = seed or 0, epoch = epoch or 0 })
  elseif x.dtype == 'uint8' then x = x:float():div(255) end
  local y = s[2]
  if self.target_transform then y = self.target_transform(y) end
  return x, y
end

-- Whether a DataLoader may hand the files to its C workers with transform
-- tf (what get_transformed would do, in C): the default loader (read_image
-- RGB), no target_transform, tf nil or a data.transforms transform, and
-- get_transformed not overridden.
function DatasetFolder:c_files(tf)
  return self.default_loader and self.target_transform == nil and type(tf) ~= 'function' and
    self.get_transformed == DatasetFolder.get_transformed
end

function DatasetFolder:get(i)
  local tf = self.transform
  if is_table(tf) and not transforms.is_transform(tf) then tf = transforms.Compose(tf) end
  return self:get_transformed(i, tf, 0, 0)
end

function DatasetFolder:__tostring()
  return ('%s(%d samples, %d classes, root %s)'):format(self.__name, #self.samples, #self.classes, self.root)
end

local ImageFolder = DatasetFolder:extend('ImageFolder')
ImageFolder.default_extensions = M.IMG_EXTENSIONS

M.DatasetFolder, M.ImageFolder = DatasetFolder, ImageFolder
return M
