--- Calls whose spelling changed between Neovim 0.10 and 0.11 (client methods became `client:m()`,
--- `vim.str_byteindex` took an encoding argument). Everything else uses the 0.10 API directly.
local M = {}

local new_api = vim.fn.has("nvim-0.11") == 1

--- `client:name(...)` on 0.11+, `client.name(...)` on 0.10 (for request, notify, cancel_request,
--- stop, is_stopped: the 0.10 client kept those as closures over itself).
local function call(client, name, ...)
  if new_api then
    return client[name](client, ...)
  end
  return client[name](...)
end

---@return boolean ok, integer? request_id
function M.request(client, method, params, handler, bufnr)
  return call(client, "request", method, params, handler, bufnr)
end

function M.notify(client, method, params)
  return call(client, "notify", method, params)
end

function M.cancel_request(client, id)
  return call(client, "cancel_request", id)
end

function M.stop(client, force)
  return call(client, "stop", force)
end

function M.is_stopped(client)
  return call(client, "is_stopped")
end

--- Run the server command an item carries (LSP `InlineCompletionItem.command`) after accepting it.
function M.exec_cmd(client, command, bufnr)
  if new_api then
    return client:exec_cmd(command, { bufnr = bufnr })
  end
  return client:_exec_cmd(command, { bufnr = bufnr })
end

--- Byte column of LSP `character` (in the client's offset encoding) on a buffer line.
function M.byte_col(bufnr, row, character, encoding)
  local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ""
  if encoding == "utf-8" then
    return math.min(character, #line)
  end
  local ok, col
  if new_api then
    ok, col = pcall(vim.str_byteindex, line, encoding, character, false)
  else
    ok, col = pcall(vim.str_byteindex, line, character, encoding == "utf-16")
  end
  return ok and col or #line
end

return M
