--- `:checkhealth spanfill`: Neovim version and backend, the server command, the running client
--- and what the server reports about itself.
local M = {}

local health = vim.health

local function check_version(spanfill)
  local v = vim.version()
  local version = ("%d.%d.%d"):format(v.major, v.minor, v.patch)
  if vim.fn.has("nvim-0.10") == 0 then
    health.error("Neovim " .. version .. " is too old", "spanfill needs Neovim 0.10 or newer")
    return
  end
  local backend = spanfill.backend()
  local how = backend == "native" and "vim.lsp.inline_completion (built in)"
    or "spanfill's ghost-text fallback (extmarks)"
  health.ok(("Neovim %s; ghost text via %s"):format(version, how))
end

local function check_command(spanfill)
  local cmd = spanfill.options.cmd
  local exe = cmd[1]
  if vim.fn.executable(exe) == 0 then
    health.error(
      ("server command %q is not executable"):format(exe),
      { 'pass the full path: require("spanfill").setup({ cmd = { "/path/to/repo/.venv/bin/spanfill", "serve" } })' }
    )
    return false
  end
  health.ok(("server command: %s (%s)"):format(table.concat(cmd, " "), vim.fn.exepath(exe)))
  -- the command as configured, asked for its help: `uv run spanfill serve`, `python -m ...` as well
  local probe = vim.list_extend(vim.deepcopy(cmd), { "--help" })
  local shown = table.concat(probe, " ")
  local result = vim.system(probe, { text = true }):wait(15000)
  if result.code ~= 0 then
    health.error(
      ("`%s` exited with %s"):format(shown, tostring(result.code)),
      { vim.trim((result.stderr or "") .. (result.stdout or "")) }
    )
    return false
  end
  health.ok(("`%s` runs"):format(shown))
  return true
end

local function check_client(spanfill)
  health.info("filetypes: " .. table.concat(spanfill.options.filetypes, ", "))
  health.info("suggestions: " .. (spanfill.enabled and "on" or "off (:SpanfillToggle)"))
  local client = spanfill.client()
  if not client then
    health.warn(
      "the server is not running",
      { "open a file of one of the filetypes above; :SpanfillLog shows why a start failed" }
    )
    return
  end
  local provider = client.server_capabilities.inlineCompletionProvider
  if not provider then
    health.error("the running server does not advertise inlineCompletionProvider")
    return
  end
  health.ok(("server running (client %d), attached to %d buffer(s)"):format(
    client.id,
    #vim.tbl_keys(client.attached_buffers)
  ))
  local done, err, status = false, nil, nil
  spanfill.status(function(e, s)
    done, err, status = true, e, s
  end)
  vim.wait(5000, function()
    return done
  end, 20)
  if not done or err then
    health.warn("spanfill/status: " .. (err or "no answer in 5 s"))
    return
  end
  status = status or {}
  if status.state == "failed" then
    health.error("the server could not load its model: " .. tostring(status.error), { ":SpanfillLog shows the server's log" })
  elseif status.state ~= "ready" then
    health.warn("model state: " .. tostring(status.state) .. " (it loads after the server starts)")
  else
    health.ok(("model %s on %s (%s)"):format(tostring(status.model), tostring(status.device), tostring(status.dtype)))
  end
  local function show(value)
    return vim.inspect(value, { newline = " ", indent = "" })
  end
  for _, key in ipairs({ "latencyMs", "cacheHitRate", "accepted", "rejected", "acceptanceRate", "settings" }) do
    if status[key] ~= nil then
      health.info(("%s: %s"):format(key, show(status[key])))
    end
  end
end

function M.check()
  local spanfill = require("spanfill")
  health.start("spanfill")
  check_version(spanfill)
  if check_command(spanfill) then
    check_client(spanfill)
  end
end

return M
