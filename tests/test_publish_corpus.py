"""Each real crawl of the shared corpus is chunked, validates and is published."""

from __future__ import annotations

import os

import pytest

from firechunk.crawlfile import read_crawl
from firechunk.pipeline import chunk_crawl
from firechunk.publish import build_and_publish, format_result
from tests.corpus import corpus_params


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params())
def test_each_corpus_crawl_validates_and_publishes(path, tmp_path):
    run = chunk_crawl(read_crawl(path), workers=1)

    result = build_and_publish(run, tmp_path)

    assert result.published, format_result(result)
    assert os.readlink(tmp_path / "latest") == f"runs/{result.run_id}"
    assert result.validation.evaluated_expectations > 0
