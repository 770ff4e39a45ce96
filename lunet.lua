-- lunet from a source checkout: a script run from the repository root
-- (`luajit script.lua`) finds this file through package.path's default './?.lua';
-- it puts the checkout's lua/ first on package.path and loads lua/lunet/init.lua,
-- so no LUA_PATH is needed. `make install` and luarocks install lua/ only, not
-- this file.
local dir = debug.getinfo(1, 'S').source:match('^@(.*[/\\])') or './'
package.path = dir .. 'lua/?.lua;' .. dir .. 'lua/?/init.lua;' .. package.path
return dofile(dir .. 'lua/lunet/init.lua')
