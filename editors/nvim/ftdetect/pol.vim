" Pol policy files (polc): *.pol
autocmd BufRead,BufNewFile *.pol setfiletype pol
