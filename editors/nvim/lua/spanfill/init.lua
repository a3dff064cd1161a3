--- spanfill for Neovim: starts `spanfill serve` (an LSP server over stdio) for the configured
--- filetypes and shows its `textDocument/inlineCompletion` answers as ghost text.
---
---   require("spanfill").setup({ cmd = { "/path/to/.venv/bin/spanfill", "serve" } })
---
--- Neovim 0.12+ draws the ghost text with the built-in `vim.lsp.inline_completion`; 0.10 and 0.11
--- use the small renderer in `spanfill.ghost` (extmarks with virt_text / virt_lines), driven by the
--- same request. One server process serves every buffer, so the model is loaded once.
local M = {}

local compat = require("spanfill.compat")

local NAME = "spanfill"
local STATUS = "spanfill/status"
local REJECTED = "spanfill/rejected"
local ACCEPT_COMMAND = "spanfill.accept" -- what the server puts in each item; accepting runs it
local NATIVE_NAMESPACE = "nvim.lsp.inline_completion" -- where vim.lsp.inline_completion draws

---@class spanfill.Keymaps
---@field accept string|false         accept the whole suggestion (else the key's earlier mapping or itself)
---@field accept_word string|false    accept up to the end of the next word
---@field accept_line string|false    accept up to the end of the current line
---@field next string|false           next candidate
---@field prev string|false           previous candidate
---@field dismiss string|false        hide the suggestion

---@class spanfill.Options
---@field cmd string[]                server command, e.g. { "/repo/.venv/bin/spanfill", "serve" }
---@field filetypes string[]          filetypes that get completions
---@field settings table              server settings (server/settings.py): model, device, dtype, spanLength, steps, debounceMs, ...
---@field backend "auto"|"native"|"ghost"  "auto": native on 0.12+, else ghost
---@field debounce_ms integer         ghost backend: wait after the last keystroke before asking
---@field keymaps spanfill.Keymaps
local defaults = {
  cmd = { "spanfill", "serve" },
  filetypes = { "python" },
  settings = {},
  backend = "auto",
  debounce_ms = 30,
  keymaps = {
    accept = "<Tab>",
    accept_word = "<M-Right>",
    accept_line = "<M-C-Right>",
    next = "<M-]>",
    prev = "<M-[>",
    dismiss = "<C-]>",
  },
}

---@type spanfill.Options
M.options = vim.deepcopy(defaults)
M.enabled = true

local function has_native()
  return vim.lsp.inline_completion ~= nil and vim.fn.has("nvim-0.12") == 1
end

--- The backend in use: "native" or "ghost".
function M.backend()
  local choice = M.options.backend
  if choice == "native" and not has_native() then
    vim.notify_once("spanfill: backend 'native' needs Neovim 0.12; using the ghost-text fallback", vim.log.levels.WARN)
    return "ghost"
  end
  if choice == "auto" then
    return has_native() and "native" or "ghost"
  end
  return choice
end

--- The running spanfill client, if any.
---@return vim.lsp.Client?
function M.client()
  return vim.lsp.get_clients({ name = NAME })[1]
end

local function server_settings()
  local settings = vim.deepcopy(M.options.settings)
  -- The server only answers for enabled languageIds; Neovim sends the filetype as languageId.
  local enable = { ["*"] = false }
  for _, ft in ipairs(M.options.filetypes) do
    enable[ft] = M.enabled
  end
  settings.enable = enable
  -- Neovim splits inserted text on "\n" alone: in a CRLF ('fileformat' dos) buffer a suggestion with
  -- the document's "\r\n" would leave a "\r" at the end of every line it inserts.
  if settings.lineBreaks == nil then
    settings.lineBreaks = "lf"
  end
  return { [NAME] = settings }
end

local function push_settings()
  local client = M.client()
  if client then
    compat.notify(client, "workspace/didChangeConfiguration", { settings = server_settings() })
  end
end

local on_attach -- set up with the keymaps below

local function client_config()
  return {
    name = NAME,
    cmd = M.options.cmd,
    filetypes = M.options.filetypes,
    init_options = server_settings(),
    settings = server_settings(),
    -- One server for every buffer and project: the model is loaded once.
    reuse_client = function(client, config)
      return client.name == config.name and not compat.is_stopped(client)
    end,
    on_attach = on_attach,
  }
end

--- Ask the server for model, device, dtype, cache hit rate and latency; `callback(err, status)`.
function M.status(callback)
  local client = M.client()
  if not client then
    return callback("spanfill is not running (open a " .. table.concat(M.options.filetypes, "/") .. " file)")
  end
  compat.request(client, STATUS, {}, function(err, result)
    callback(err and (err.message or vim.inspect(err)), result)
  end)
end

--- Tell the server the user turned a suggestion down (it keeps acceptance statistics). Accepting
--- needs no call here: it runs the item's `spanfill.accept` command, which reaches the server.
---@param item { command?: lsp.Command }
function M.reject(client, item)
  local command = item.command
  if command and command.command == ACCEPT_COMMAND and command.arguments then
    compat.notify(client, REJECTED, { id = command.arguments[1] })
  end
end

--- Turn suggestions on or off without stopping the server (the model stays loaded).
function M.toggle(on)
  if on == nil then
    on = not M.enabled
  end
  M.enabled = on
  local client = M.client()
  if client then
    if M.backend() == "native" then
      vim.lsp.inline_completion.enable(on, { client_id = client.id })
    else
      require("spanfill.ghost").dismiss()
    end
  end
  push_settings()
  vim.notify("spanfill " .. (on and "on" or "off"))
end

--- Start (or reuse) the client for every loaded buffer whose filetype is configured.
local function start_for_loaded_buffers()
  local config = client_config()
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.tbl_contains(M.options.filetypes, vim.bo[buf].filetype) then
      vim.lsp.start(config, { bufnr = buf, reuse_client = config.reuse_client })
    end
  end
end

function M.restart()
  for _, client in ipairs(vim.lsp.get_clients({ name = NAME })) do
    compat.stop(client, true)
  end
  vim.defer_fn(start_for_loaded_buffers, 500)
end

local function native_dismiss(bufnr)
  -- `get` with an `on_accept` that inserts nothing drops the current item: the public way to dismiss.
  return vim.lsp.inline_completion.get({
    bufnr = bufnr,
    on_accept = function(item)
      local client = vim.lsp.get_client_by_id(item.client_id)
      if client then
        M.reject(client, item)
      end
    end,
  })
end

--- Insert part of the suggestion: `cut(text)` returns the piece to insert. The rest is requested
--- again; the server answers that from its typing-through cache.
local function native_partial(cut)
  return vim.lsp.inline_completion.get({
    on_accept = function(item)
      local text = type(item.insert_text) == "string" and item.insert_text or item.insert_text.value
      local ghost = require("spanfill.ghost")
      local row, col = unpack(vim.api.nvim_win_get_cursor(0))
      local start_row, start_col = row - 1, col
      if item.range then
        start_row, start_col = item.range.start.row, item.range.start.col
      end
      local typed = table.concat(vim.api.nvim_buf_get_text(0, start_row, start_col, row - 1, col, {}), "\n")
      if text:sub(1, #typed) == typed then
        local rest = text:sub(#typed + 1)
        local piece = cut(rest)
        ghost.insert_at_cursor(piece)
        -- the piece was all that was left: the suggestion is accepted, so run its command as Tab would
        local client = item.command and piece == rest and vim.lsp.get_client_by_id(item.client_id)
        if client then
          compat.exec_cmd(client, item.command, vim.api.nvim_get_current_buf())
        end
      end
    end,
  })
end

--- Show the next (count 1) or previous (-1) candidate; false when no suggestion is on screen.
local function native_select(count)
  local ns = vim.api.nvim_get_namespaces()[NATIVE_NAMESPACE]
  if ns and #vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { limit = 1 }) == 0 then
    return false
  end
  vim.lsp.inline_completion.select({ count = count })
  return true
end

--- Keymap actions, each returning true when it did something (else the key does what it did before).
local actions = {
  native = {
    accept = function()
      -- not `get()` alone: it inserts the item at the range it had when it came, before whatever the
      -- user typed into it since (the editor asks again only after a pause)
      return native_partial(function(rest)
        return rest
      end)
    end,
    accept_word = function()
      return native_partial(require("spanfill.ghost").next_word)
    end,
    accept_line = function()
      return native_partial(require("spanfill.ghost").next_line)
    end,
    next = function()
      return native_select(1)
    end,
    prev = function()
      return native_select(-1)
    end,
    dismiss = function()
      return native_dismiss(0)
    end,
  },
}

local DESC = "spanfill: "

--- Callbacks of earlier mappings that are not <expr>, by number: `<Cmd>` runs them in key order.
local callbacks = {}

--- Per buffer and key, the insert-mode mapping the key had before spanfill's (buffer-local or
--- global; maparg's dictionary, a callback that is not <expr> numbered in `callbacks` as
--- `callback_index`), or false for none: what the key does when spanfill has nothing to do with it.
--- Kept across re-attaches, whose maparg would find spanfill's own mapping.
local previous = {}

local function previous_mapping(bufnr, lhs)
  previous[bufnr] = previous[bufnr] or {}
  if previous[bufnr][lhs] == nil then
    local found = vim.api.nvim_buf_call(bufnr, function()
      return vim.fn.maparg(lhs, "i", false, true)
    end)
    local ours = vim.tbl_isempty(found) or vim.startswith(found.desc or "", DESC)
    if not ours and found.callback and found.expr ~= 1 then
      callbacks[#callbacks + 1] = found.callback
      found.callback_index = #callbacks
    end
    previous[bufnr][lhs] = not ours and found
  end
  return previous[bufnr][lhs]
end

--- Run earlier mapping `n`'s callback (the keys fall_back returns call it).
function M._fall_back(n)
  callbacks[n]()
end

--- The keys an <expr> mapping of `lhs` returns to do what `mapping` (maparg's dictionary, or false:
--- the key itself) does. A callback that is not <expr> may change the buffer, which an <expr>
--- mapping may not: `<Cmd>` runs it next, before any key typed after. Keys of a recursive mapping
--- are fed to be mapped again, unless they hold `lhs` itself (that would come back here).
local function fall_back(lhs, mapping)
  if not mapping then
    return vim.keycode(lhs)
  end
  local keys
  if mapping.callback then
    if mapping.expr ~= 1 then
      return vim.keycode(("<Cmd>lua require('spanfill')._fall_back(%d)<CR>"):format(mapping.callback_index))
    end
    keys = mapping.callback() or ""
    if mapping.replace_keycodes == 1 then
      keys = vim.keycode(keys)
    end
  else
    -- as Vim reads a mapping: key notation in the rhs replaced, then an <expr> one evaluated (its
    -- value is keys as they are)
    local rhs = vim.keycode((mapping.rhs or ""):gsub("<[Ss][Ii][Dd]>", ("<SNR>%d_"):format(mapping.sid or 0)))
    keys = mapping.expr == 1 and vim.api.nvim_eval(rhs) or rhs
  end
  if mapping.noremap ~= 1 and not keys:find(vim.keycode(lhs), 1, true) then
    vim.api.nvim_feedkeys(keys, "im", false)
    return ""
  end
  return keys
end

--- Buffer-local, so buffers without spanfill keep their keys (and other plugins theirs). A key
--- with nothing to accept, cycle or dismiss does what its earlier mapping did (as copilot.vim's
--- <Tab> does), or types itself.
local function set_keymaps(bufnr)
  for action, lhs in pairs(M.options.keymaps) do
    if lhs then
      local before = previous_mapping(bufnr, lhs)
      vim.keymap.set("i", lhs, function()
        local done
        if action == "accept" and vim.fn.pumvisible() == 1 then
          done = false -- the completion popup's: <Tab> moves through it, as the user mapped it
        elseif M.backend() == "native" then
          done = actions.native[action]()
        else
          done = require("spanfill.ghost")[action]()
        end
        if done then
          return ""
        end
        return fall_back(lhs, before)
      end, { buffer = bufnr, expr = true, replace_keycodes = false, desc = DESC .. action:gsub("_", " ") })
    end
  end
end

on_attach = function(client, bufnr)
  set_keymaps(bufnr)
  if M.backend() == "native" then
    vim.lsp.inline_completion.enable(M.enabled, { client_id = client.id })
  else
    require("spanfill.ghost").attach(client, bufnr)
  end
end

local function create_commands()
  vim.api.nvim_create_user_command("SpanfillToggle", function()
    M.toggle()
  end, { desc = "spanfill: turn inline suggestions on/off" })
  vim.api.nvim_create_user_command("SpanfillRestart", M.restart, { desc = "spanfill: restart the server" })
  vim.api.nvim_create_user_command("SpanfillStatus", function()
    M.status(function(err, status)
      vim.notify(err and ("spanfill: " .. err) or vim.inspect(status), err and vim.log.levels.WARN or nil)
    end)
  end, { desc = "spanfill: model, device, cache hit rate, latency" })
  vim.api.nvim_create_user_command("SpanfillLog", function()
    vim.cmd.tabnew(vim.lsp.log.get_filename())
  end, { desc = "spanfill: open the LSP log (server stderr goes there)" })
end

local function validate(opts)
  for _, key in ipairs({ "cmd", "filetypes", "settings", "keymaps" }) do
    if type(opts[key]) ~= "table" then
      error(("spanfill.setup: %s = %s; expected a table"):format(key, vim.inspect(opts[key])))
    end
  end
  if not vim.tbl_contains({ "auto", "native", "ghost" }, opts.backend) then
    error(("spanfill.setup: backend = %q; expected 'auto', 'native' or 'ghost'"):format(tostring(opts.backend)))
  end
end

--- Configure spanfill and start it for `opts.filetypes`.
---@param opts? spanfill.Options|table
function M.setup(opts)
  M.options = vim.tbl_deep_extend("force", vim.deepcopy(defaults), opts or {})
  if opts and opts.filetypes then
    M.options.filetypes = opts.filetypes -- lists replace, they do not merge
  end
  if type(M.options.cmd) == "string" then
    M.options.cmd = { M.options.cmd, "serve" }
  end
  validate(M.options)

  create_commands()

  if vim.lsp.config and vim.lsp.enable then
    vim.lsp.config(NAME, client_config())
    vim.lsp.enable(NAME)
    return
  end
  -- Neovim 0.10: no vim.lsp.config; start (or reuse) the client when a filetype matches.
  vim.api.nvim_create_autocmd("FileType", {
    group = vim.api.nvim_create_augroup("spanfill.start", { clear = true }),
    pattern = M.options.filetypes,
    callback = function(args)
      local config = client_config()
      vim.lsp.start(config, { bufnr = args.buf, reuse_client = config.reuse_client })
    end,
  })
  start_for_loaded_buffers()
end

return M
