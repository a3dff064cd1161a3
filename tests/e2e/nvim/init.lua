-- Config for the headless Neovim of tests/e2e/test_nvim.py: the plugin from this checkout set up
-- from environment variables, plus `T`, a few probes the test reads with `--remote-expr`.
vim.opt.runtimepath:prepend(vim.env.SPANFILL_PLUGIN)
vim.opt.swapfile = false
vim.opt.shortmess:append("I")
vim.lsp.log.set_level(vim.env.SPANFILL_LSP_LOG or "warn")

local settings = { device = "cpu", debounceMs = 0 }
if (vim.env.SPANFILL_MODEL or "") ~= "" then
  settings.model = vim.env.SPANFILL_MODEL
end

-- A user's own insert-mode mappings of spanfill's keys, made before the plugin maps them: a Lua
-- <expr> callback, a recursive mapping through a <Plug> key, a callback that edits the buffer and a
-- Vimscript <expr>; each inserts a marker where spanfill has nothing to do with the key.
if vim.env.SPANFILL_USER_MAPS == "1" then
  vim.keymap.set("i", "<Tab>", function()
    return "[tab]"
  end, { expr = true })
  vim.keymap.set("i", "<Plug>(user-next)", "[next]")
  vim.keymap.set("i", "<M-]>", "<Plug>(user-next)", { remap = true })
  vim.keymap.set("i", "<C-]>", function()
    vim.api.nvim_put({ "[dismiss]" }, "c", false, true)
  end)
  vim.cmd([[inoremap <expr> <M-Right> "[" .. "word]\<Left>\<Right>"]])
end

local spanfill = require("spanfill")
spanfill.setup({
  cmd = vim.json.decode(vim.env.SPANFILL_CMD),
  backend = vim.env.SPANFILL_BACKEND,
  settings = settings,
})

-- The namespace each backend draws ghost text in.
local namespaces = { native = "nvim.lsp.inline_completion", ghost = "spanfill.ghost" }

_G.T = {}

--- The ghost text on screen: the extmark's virt_text, then one line per virt_lines entry.
--- The "(i/n)" candidate hint is drawn in its own highlight group and left out.
local hint_groups = { ComplHintMore = true, SpanfillGhostHint = true }
function T.ghost()
  local ns = vim.api.nvim_get_namespaces()[namespaces[spanfill.backend()]]
  local marks = ns and vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true }) or {}
  if #marks == 0 then
    return vim.NIL
  end
  local function text(chunks)
    local out = {}
    for _, chunk in ipairs(chunks or {}) do
      if not hint_groups[chunk[2]] then
        out[#out + 1] = chunk[1]
      end
    end
    return table.concat(out)
  end
  local row, col, details = marks[1][2], marks[1][3], marks[1][4]
  local lines = { text(details.virt_text) }
  for _, virt_line in ipairs(details.virt_lines or {}) do
    lines[#lines + 1] = text(virt_line)
  end
  return { row = row, col = col, text = table.concat(lines, "\n") }
end

function T.state()
  local client = spanfill.client()
  local cursor = vim.api.nvim_win_get_cursor(0)
  return {
    mode = vim.api.nvim_get_mode().mode,
    backend = spanfill.backend(),
    attached = client ~= nil and client.attached_buffers[vim.api.nvim_get_current_buf()] == true,
    initialized = client ~= nil and client.initialized == true,
    cursor = { cursor[1] - 1, cursor[2] },
    lines = vim.api.nvim_buf_get_lines(0, 0, -1, false),
  }
end

function T.pum()
  return vim.fn.pumvisible() == 1
end

function T.buffer_lines()
  return vim.api.nvim_buf_get_lines(0, 0, -1, false)
end

--- spanfill/status: ask now, read the answer from a later `T.status()` call.
local status = vim.NIL
function T.ask_status()
  status = vim.NIL
  spanfill.status(function(err, result)
    status = err and { error = err } or result
  end)
  return true
end

function T.status()
  return status
end
