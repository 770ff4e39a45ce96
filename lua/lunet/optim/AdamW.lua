-- lunet.optim.AdamW: Adam with decoupled weight decay (see Adam.lua).
return require('lunet.optim.Adam').AdamW
