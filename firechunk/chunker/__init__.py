"""The chunker: one page's markdown cleaned, split into units and packed into chunks
(`firechunk.chunker.page` is the entry point)."""
