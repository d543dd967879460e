"""Data models at the pipeline's boundaries: crawled pages, chunks, reports and job state."""
