#!/usr/bin/env bash
# `make wheel-check`: build firechunk's wheel, install it (not editable, no extras) in a
# fresh venv with the lock's versions, and run it from a directory outside the repository:
# `firechunk chunk` on the sample crawl must publish (the expectations are package data),
# `firechunk rebuild --replay` must run its flow on the temporary Prefect API (uvicorn
# imports firechunk.tasks from site-packages), and `firechunk.chunk_markdown` must work.
# Then prints the wheel's size and the installed size of that base venv.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-python3.11}
BUILDER=${BUILDER:-.venv/bin/python}  # any Python with pip: it only builds
WORK=$(mktemp -d "${TMPDIR:-/tmp}/firechunk-wheel.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

rm -rf build  # setuptools' staging directory: a stale one would add deleted files
"$BUILDER" -m pip wheel --quiet --no-deps --wheel-dir "$WORK/dist" .
rm -rf build
WHEEL=$(ls "$WORK"/dist/firechunk-*.whl)
echo "wheel: $(basename "$WHEEL"), $(du -k "$WHEEL" | cut -f1) kB"

"$PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -c requirements.lock "$WHEEL"
SITE=$("$WORK/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
for name in flows tasks schemas expectations automations; do
    if [ -e "$SITE/$name" ]; then
        echo "wheel-check: $name/ is installed at the top of site-packages" >&2
        exit 1
    fi
    # firechunk/$name is a link in the repository; the wheel holds the files themselves
    if [ -L "$SITE/firechunk/$name" ] || [ ! -f "$SITE/firechunk/$name/__init__.py" ]; then
        echo "wheel-check: firechunk/$name is not a folder of files in the wheel" >&2
        exit 1
    fi
done

cd "$WORK"  # outside the repository: nothing can come from the checkout
venv/bin/firechunk chunk "$ROOT/data/sample/crawl.json" --data-dir "$WORK/chunked"
test -L "$WORK/chunked/latest" || { echo "wheel-check: chunk did not publish" >&2; exit 1; }
venv/bin/firechunk rebuild --replay "$ROOT/data/sample/crawl.json" --data-dir "$WORK/rebuilt"
test -L "$WORK/rebuilt/latest" || { echo "wheel-check: rebuild did not publish" >&2; exit 1; }
venv/bin/python - "$SITE" <<'EOF'
import sys

import firechunk
from firechunk import chunk_markdown

assert firechunk.__file__.startswith(sys.argv[1]), firechunk.__file__
page = "# Retries\n\nA message that fails is retried three times.\n\n## Dead letters\n\nThen it waits."
chunks = chunk_markdown(page, url="https://docs.example.com/retries", title="Retries")
assert chunks and chunks[0].metadata.breadcrumb == ["Retries"], chunks
print(f"chunk_markdown from {firechunk.__file__}: {len(chunks)} chunk(s)")
EOF
echo "base install (no extras): $(du -sh "$WORK/venv" | cut -f1) in $WORK/venv"
