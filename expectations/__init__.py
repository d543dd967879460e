"""Great Expectations suites, as files (`*.json`): the package data of firechunk.expectations."""
