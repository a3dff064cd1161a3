--- Ghost text for Neovim 0.10 / 0.11 (and `backend = "ghost"` on 0.12): asks the server for
--- `textDocument/inlineCompletion` after a pause in typing and draws the first candidate after the
--- cursor with an extmark (`virt_text` inline for the first line, `virt_lines` for the rest).
---
--- A suggestion is anchored where it starts in the buffer (its range start, else the cursor at
--- request time). Whatever the user has typed since is matched against it: while the typing
--- follows the suggestion the rest stays on screen without a new request (typing through), and a
--- partial accept is just an insertion that the same matching then absorbs.
local M = {}

local api = vim.api
local compat = require("spanfill.compat")

local METHOD = "textDocument/inlineCompletion"
local TRIGGER = { invoked = 1, automatic = 2 } -- the server answers Invoked with several candidates
local ns = api.nvim_create_namespace("spanfill.ghost")

api.nvim_set_hl(0, "SpanfillGhost", { link = "Comment", default = true })
api.nvim_set_hl(0, "SpanfillGhostHint", { link = "NonText", default = true })

---@class spanfill.Suggestion
---@field bufnr integer
---@field client_id integer
---@field items table[]        lsp.InlineCompletionItem[]
---@field index integer        the candidate on screen
---@field anchors table[]      per item: { row, col, replace_len } (0-based row, byte col)

---@type spanfill.Suggestion?
local current
local timer = assert(vim.uv or vim.loop).new_timer()
local pending ---@type { client: vim.lsp.Client, id: integer }?

local function insert_text(item)
  local text = item.insertText
  return type(text) == "string" and text or text.value
end

--- Where `item` starts and how many bytes after the cursor it replaces on accept.
local function anchor(bufnr, client, item, row, col)
  if not item.range then
    return { row = row, col = col, replace_len = 0 }
  end
  local enc = client.offset_encoding
  local s, e = item.range.start, item.range["end"]
  local start_col = compat.byte_col(bufnr, s.line, s.character, enc)
  local end_col = compat.byte_col(bufnr, e.line, e.character, enc)
  local replace_len = (e.line == row and end_col > col) and end_col - col or 0
  return { row = s.line, col = start_col, replace_len = replace_len }
end

--- The part of the current candidate still to be inserted at the cursor, or nil when the text
--- typed since its anchor no longer matches it.
---@return string?
local function remaining()
  if not current or api.nvim_get_current_buf() ~= current.bufnr then
    return nil
  end
  local a = current.anchors[current.index]
  local row, col = unpack(api.nvim_win_get_cursor(0))
  row = row - 1
  if row < a.row or (row == a.row and col < a.col) then
    return nil
  end
  local ok, typed = pcall(api.nvim_buf_get_text, current.bufnr, a.row, a.col, row, col, {})
  if not ok then
    return nil
  end
  typed = table.concat(typed, "\n")
  local text = insert_text(current.items[current.index])
  if text:sub(1, #typed) ~= typed then
    return nil
  end
  return text:sub(#typed + 1)
end

local function clear()
  if current then
    pcall(api.nvim_buf_clear_namespace, current.bufnr, ns, 0, -1)
  end
end

--- Draw the rest of the current candidate at the cursor; false when there is nothing to draw.
local function render()
  clear()
  local text = remaining()
  if not text or text == "" then
    return false
  end
  local tabs = string.rep(" ", vim.bo[current.bufnr].tabstop)
  local lines = vim.split((text:gsub("\t", tabs)), "\n", { plain = true })
  local chunks = {}
  for i, line in ipairs(lines) do
    chunks[i] = { { line, "SpanfillGhost" } }
  end
  if #current.items > 1 then
    table.insert(chunks[#chunks], { (" (%d/%d)"):format(current.index, #current.items), "SpanfillGhostHint" })
  end
  local virt_lines = { unpack(chunks, 2) }
  local row, col = unpack(api.nvim_win_get_cursor(0))
  api.nvim_buf_set_extmark(current.bufnr, ns, row - 1, col, {
    virt_text = chunks[1],
    virt_text_pos = "inline",
    virt_lines = #virt_lines > 0 and virt_lines or nil,
    hl_mode = "combine",
  })
  return true
end

local function cancel_pending()
  timer:stop()
  if pending then
    pcall(compat.cancel_request, pending.client, pending.id)
    pending = nil
  end
end

--- Ask for suggestions at the cursor and show candidate `index` of the answer.
local function request(bufnr, client_id, kind, index)
  cancel_pending()
  local client = vim.lsp.get_client_by_id(client_id)
  if not client or api.nvim_get_current_buf() ~= bufnr or not api.nvim_get_mode().mode:match("^i") then
    return
  end
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  params.context = { triggerKind = kind }
  local tick = api.nvim_buf_get_changedtick(bufnr)
  local row, col = unpack(api.nvim_win_get_cursor(0))
  local this -- the request's id: an older request's answer (a cancelled one's error) leaves the newer pending
  local ok, id = compat.request(client, METHOD, params, function(err, result)
    if pending and pending.client == client and pending.id == this then
      pending = nil
    end
    local stale = api.nvim_get_current_buf() ~= bufnr
      or api.nvim_buf_get_changedtick(bufnr) ~= tick
      or not vim.deep_equal(api.nvim_win_get_cursor(0), { row, col })
      or not api.nvim_get_mode().mode:match("^i")
    if err or not result or stale then
      return
    end
    local items = result.items or result
    if #items == 0 then
      return
    end
    local anchors = {}
    for i, item in ipairs(items) do
      anchors[i] = anchor(bufnr, client, item, row - 1, col)
    end
    clear()
    index = math.min(index, #items)
    current = { bufnr = bufnr, client_id = client.id, items = items, index = index, anchors = anchors }
    if not render() then
      current = nil
    end
  end, bufnr)
  if ok and id then
    this = id
    pending = { client = client, id = id }
  end
end

--- Run the item's command (the server's `spanfill.accept`, which counts the acceptance).
local function accepted()
  local item = current.items[current.index]
  local client = vim.lsp.get_client_by_id(current.client_id)
  if client and item.command then
    compat.exec_cmd(client, item.command, current.bufnr)
  end
end

local function reject()
  local client = current and vim.lsp.get_client_by_id(current.client_id)
  if client then
    require("spanfill").reject(client, current.items[current.index])
  end
end

--- Typing: keep the suggestion while the typing follows it, else ask again after a pause.
local function on_text_or_cursor(bufnr, client_id)
  if not require("spanfill").enabled then
    return
  end
  if current and current.bufnr == bufnr and render() then
    return
  end
  if current and remaining() == "" then
    accepted() -- typed or word-accepted to its end
  elseif current then
    reject()
  end
  clear()
  current = nil
  cancel_pending()
  timer:start(
    require("spanfill").options.debounce_ms,
    0,
    vim.schedule_wrap(function()
      request(bufnr, client_id, TRIGGER.automatic, 1)
    end)
  )
end

--- Start drawing ghost text in `bufnr` from `client`.
function M.attach(client, bufnr)
  local group = api.nvim_create_augroup("spanfill.ghost." .. bufnr, { clear = true })
  api.nvim_create_autocmd({ "InsertEnter", "TextChangedI", "TextChangedP", "CursorMovedI" }, {
    group = group,
    buffer = bufnr,
    callback = function()
      on_text_or_cursor(bufnr, client.id)
    end,
  })
  api.nvim_create_autocmd({ "InsertLeave", "BufLeave" }, {
    group = group,
    buffer = bufnr,
    callback = function()
      M.dismiss()
    end,
  })
  api.nvim_create_autocmd("LspDetach", {
    group = group,
    buffer = bufnr,
    callback = function(args)
      if args.data and args.data.client_id == client.id then
        M.dismiss()
        api.nvim_del_augroup_by_id(group)
      end
    end,
  })
end

--- Insert `text` at the cursor and put the cursor after it (what every accept does).
function M.insert_at_cursor(text, replace_len)
  local row, col = unpack(api.nvim_win_get_cursor(0))
  local lines = vim.split(text, "\n", { plain = true })
  api.nvim_buf_set_text(0, row - 1, col, row - 1, col + (replace_len or 0), lines)
  local last_row = row + #lines - 1
  local last_col = (#lines == 1 and col or 0) + #lines[#lines]
  api.nvim_win_set_cursor(0, { last_row, last_col })
end

--- The next word of `text`, with the whitespace before it (a leading newline and its indent count as one).
function M.next_word(text)
  return text:match("^\n[ \t]*") or text:match("^%s*[%w_]+") or text:match("^%s*[^%w_%s]+") or text
end

--- `text` up to the end of its first line; if it starts with a newline, that next line.
function M.next_line(text)
  return text:match("^\n?[^\n]*") or text
end

--- Accept the piece `cut(rest)` of the suggestion; the whole of it when `cut` is nil.
--- Returns false (so the key falls through) when no suggestion is on screen.
local function accept_with(cut)
  local rest = remaining()
  if not rest or rest == "" then
    return false
  end
  local whole = cut == nil
  local piece = whole and rest or cut(rest)
  -- Keymaps are <expr>: the buffer is locked until they return.
  vim.schedule(function()
    if not current then
      return
    end
    if whole then
      accepted()
      clear()
      M.insert_at_cursor(piece, current.anchors[current.index].replace_len)
      current = nil
    else
      M.insert_at_cursor(piece)
      render()
    end
  end)
  return true
end

function M.accept()
  return accept_with(nil)
end

function M.accept_word()
  return accept_with(M.next_word)
end

function M.accept_line()
  return accept_with(M.next_line)
end

local function cycle(step)
  if not current or not remaining() then
    return false
  end
  if #current.items < 2 then
    -- Automatic requests bring one candidate; an explicit one brings several.
    request(current.bufnr, current.client_id, TRIGGER.invoked, step > 0 and 2 or math.huge)
    return true
  end
  local start = current.index
  repeat
    current.index = (current.index - 1 + step) % #current.items + 1
  until current.index == start or remaining()
  render()
  return true
end

function M.next()
  return cycle(1)
end

function M.prev()
  return cycle(-1)
end

--- Hide the suggestion and cancel a request in flight; false when there was nothing to hide.
function M.dismiss()
  cancel_pending()
  local had = current ~= nil
  if had then
    reject()
  end
  clear()
  current = nil
  return had
end

--- The text on screen (tests and the health check read it).
function M.visible()
  return current and remaining() or nil
end

return M
