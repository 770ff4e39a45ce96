-- busted output handler: plainTerminal's report, then the closing line CI
-- reads: "N passed, N failed" (errors count as failures).
return function(options)
  local busted = require 'busted'
  local handler = require 'busted.outputHandlers.plainTerminal'(options)
  busted.subscribe({ 'suite', 'end' }, function()
    local failed = handler.failuresCount + handler.errorsCount
    io.write(('\n%d passed, %d failed'):format(handler.successesCount, failed))
    if handler.pendingsCount > 0 then io.write((', %d skipped'):format(handler.pendingsCount)) end
    io.write('\n')
    io.flush()
    return nil, true
  end)
  return handler
end
