-- polc's language server for Neovim, without plugins (Neovim 0.7 or later).
--
--   vim.opt.runtimepath:append("/path/to/polc/editors/nvim")
--   require("polc").setup()            -- or setup({ cmd = { "/path/to/.venv/bin/polc", "lsp" } })
--
-- Every buffer of filetype `pol` (ftdetect/pol.vim: *.pol) gets `polc lsp`:
-- diagnostics as `polc check -v` reports them, hover (K), go to definition,
-- references, rename, completion (omnifunc), formatting, document symbols.
local M = {}

M.defaults = {
  name = "polc",
  cmd = { "polc", "lsp" },
}

local function root_of(bufnr)
  local file = vim.api.nvim_buf_get_name(bufnr)
  local dir = vim.fn.fnamemodify(file, ":p:h")
  local marker = vim.fn.finddir(".git", dir .. ";")
  if marker ~= "" then
    return vim.fn.fnamemodify(marker, ":p:h:h")
  end
  return dir
end

-- Start (or reuse) the server for one buffer and attach it.
function M.attach(bufnr, opts)
  opts = vim.tbl_extend("force", M.defaults, opts or {})
  local config = {
    name = opts.name,
    cmd = opts.cmd,
    root_dir = root_of(bufnr),
    on_attach = function(_, b)
      vim.api.nvim_buf_set_option(b, "omnifunc", "v:lua.vim.lsp.omnifunc")
      if opts.on_attach then opts.on_attach(_, b) end
    end,
  }
  if vim.lsp.start then -- Neovim 0.8+: reuses a running client with the same name and root
    return vim.lsp.start(config, { bufnr = bufnr })
  end
  M._clients = M._clients or {}
  local id = M._clients[config.root_dir]
  if id == nil or vim.lsp.get_client_by_id(id) == nil then
    id = vim.lsp.start_client(config)
    M._clients[config.root_dir] = id
  end
  vim.lsp.buf_attach_client(bufnr, id)
  return id
end

function M.setup(opts)
  local group = vim.api.nvim_create_augroup("polc_lsp", { clear = true })
  vim.api.nvim_create_autocmd("FileType", {
    group = group,
    pattern = "pol",
    callback = function(args) M.attach(args.buf, opts) end,
  })
end

return M
