"""One module per `firechunk` sub-command; `firechunk.cli` registers them."""
