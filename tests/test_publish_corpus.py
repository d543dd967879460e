"""Each real crawl of the shared corpus goes through the run's stages and is published."""

from __future__ import annotations

import os

import pytest

from firechunk.pipeline import Request, run_pipeline
from firechunk.publish import format_result
from tests.corpus import corpus_params


@pytest.mark.corpus
@pytest.mark.parametrize("path", corpus_params())
def test_each_corpus_crawl_validates_and_publishes(path, tmp_path):
    night = run_pipeline(Request(replay=path, data_dir=tmp_path))
    outcome, result = night.outcome, night.result

    assert result is not None and result.published, format_result(result)
    assert outcome is not None and outcome.success
    assert os.readlink(tmp_path / "latest") == f"runs/{result.run_id}"
    assert result.validation.evaluated_expectations > 0
