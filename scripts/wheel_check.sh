#!/usr/bin/env bash
# `make wheel-check`: build firechunk's wheel and install it in a fresh venv with the lock's
# versions, run from a directory outside the repository (nothing can come from the checkout).
#
# First the base install (`pip install firechunk`, no extras): its site-packages must hold
# at most MAX_MB, none of the pipeline's libraries, and run `chunk_markdown` and
# `chunk_crawl`, `firechunk --help` and `--version`; a pipeline command must say in one line
# which extra to install, and exit 2.
# Then the `pipeline` extra goes into the same venv: `firechunk chunk` on the sample crawl
# must publish (the expectations are package data) and so must `firechunk rebuild --replay`
# (its flow and tasks imported from site-packages).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-python3.11}
BUILDER=${BUILDER:-.venv/bin/python}  # any Python with pip: it only builds
MAX_MB=${MAX_MB:-80}
# The pipeline's libraries and what only they pull in: each tens or hundreds of MB.
FORBIDDEN="prefect great-expectations polars pyarrow pandas fastapi sqlalchemy firecrawl-py scipy numpy"
# A step that hangs on a busy machine fails the check rather than blocking CI for ever;
# the limit is generous: the slowest step (the pipeline's install) takes a few minutes.
STEP_TIMEOUT=${STEP_TIMEOUT:-1200}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/firechunk-wheel.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

fail() {
    echo "wheel-check: $*" >&2
    exit 1
}

step() {
    timeout "$STEP_TIMEOUT" "$@"
}

rm -rf build  # setuptools' staging directory: a stale one would add deleted files
step "$BUILDER" -m pip wheel --quiet --no-deps --wheel-dir "$WORK/dist" .
rm -rf build
WHEEL=$(ls "$WORK"/dist/firechunk-*.whl)
echo "wheel: $(basename "$WHEEL"), $(du -k "$WHEEL" | cut -f1) kB"

"$PYTHON" -m venv "$WORK/venv"
PIP=("$WORK/venv/bin/python" -m pip install --quiet --disable-pip-version-check
    -c "$ROOT/requirements.lock")
step "${PIP[@]}" "$WHEEL"
SITE=$("$WORK/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
for name in flows tasks schemas expectations automations; do
    if [ -e "$SITE/$name" ]; then
        fail "$name/ is installed at the top of site-packages"
    fi
    # firechunk/$name is a link in the repository; the wheel holds the files themselves
    if [ -L "$SITE/firechunk/$name" ] || [ ! -f "$SITE/firechunk/$name/__init__.py" ]; then
        fail "firechunk/$name is not a folder of files in the wheel"
    fi
done

cd "$WORK"

# The base install: its size, with its largest distributions to say where it went.
KB=$(du -sk "$SITE" | cut -f1)
MB=$(awk -v kb="$KB" 'BEGIN { printf "%.1f", kb / 1024 }')
echo "base install (no extras): site-packages $MB MB (at most $MAX_MB MB); largest:"
venv/bin/python - <<'EOF'
import os
from importlib.metadata import distributions


def size(dist):
    return sum(os.path.getsize(dist.locate_file(file)) for file in dist.files or []
               if os.path.isfile(dist.locate_file(file)))


sizes = sorted(((size(dist), dist.metadata["Name"]) for dist in distributions()), reverse=True)
for found, name in sizes[:8]:
    print(f"  {found / 1e6:6.1f} MB  {name}")
EOF
if [ "$KB" -gt $((MAX_MB * 1024)) ]; then
    fail "the base install's site-packages is $MB MB, more than $MAX_MB MB"
fi
venv/bin/python - $FORBIDDEN <<'EOF'
import sys
from importlib.metadata import PackageNotFoundError, distribution

installed = []
for name in sys.argv[1:]:
    try:
        installed.append(f"{name} {distribution(name).version}")
    except PackageNotFoundError:
        pass
if installed:
    sys.exit(f"wheel-check: the base install holds {', '.join(installed)}")
print(f"base install: none of {', '.join(sys.argv[1:])}")
EOF

# The library's chunker and the command line work without any extra.
venv/bin/python - "$SITE" "$ROOT/data/sample/crawl.json" <<'EOF'
import sys

import firechunk
from firechunk import chunk_crawl, chunk_markdown

assert firechunk.__file__.startswith(sys.argv[1]), firechunk.__file__
page = "# Retries\n\nA message that fails is retried three times.\n\n## Dead letters\n\nThen it waits."
chunks = chunk_markdown(page, url="https://docs.example.com/retries", title="Retries")
assert chunks and chunks[0].metadata.breadcrumb == ["Retries"], chunks
print(f"chunk_markdown from {firechunk.__file__}: {len(chunks)} chunk(s)")
crawl = chunk_crawl(sys.argv[2])
assert crawl.chunks and crawl.report.pages_chunked, crawl.report
print(f"chunk_crawl: {len(crawl.chunks)} chunks of {crawl.report.pages_chunked} pages")
EOF
venv/bin/firechunk --version
venv/bin/firechunk --help >/dev/null

# A pipeline command without the pipeline: one line naming the extra, exit 2, no run.
code=0
venv/bin/firechunk chunk "$ROOT/data/sample/crawl.json" --data-dir "$WORK/base" \
    2>"$WORK/missing.txt" || code=$?
echo "firechunk chunk without the pipeline (exit $code): $(cat "$WORK/missing.txt")"
[ "$code" -eq 2 ] || fail "exit $code, not 2"
[ "$(wc -l <"$WORK/missing.txt")" -eq 1 ] || fail "not one line"
grep -qF "pip install 'firechunk[pipeline]'" "$WORK/missing.txt" || fail "the line names no extra"
[ ! -e "$WORK/base" ] || fail "a run was started"

# The pipeline, into the same venv.
step "${PIP[@]}" "$WHEEL[pipeline]"
step venv/bin/firechunk chunk "$ROOT/data/sample/crawl.json" --data-dir "$WORK/chunked"
test -L "$WORK/chunked/latest" || fail "chunk did not publish"
step venv/bin/firechunk rebuild --replay "$ROOT/data/sample/crawl.json" --data-dir "$WORK/rebuilt"
test -L "$WORK/rebuilt/latest" || fail "rebuild did not publish"
echo "with the pipeline extra: site-packages $(du -sh "$SITE" | cut -f1)"
echo "wheel-check: passed"
