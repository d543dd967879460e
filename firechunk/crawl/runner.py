"""Run one crawl to the end: start or resume the job, poll it, download it, write crawl.json.

Every step leaves the job state on disk first, so the process can die anywhere and a rerun
goes on from there: a job that was started is never started again (unless `recrawl`), and a
finished crawl replays from disk with no network and no API key.

The API key is a parameter, never read here: the CLI takes it from FIRECRAWL_API_KEY and a
Prefect flow can take it from a Secret block. It goes to the firecrawl-py client, only for
the API URL it was given with, and nowhere else: not into the state file, not into messages.
A failed call's text is redacted (`describe`) before it is kept, reported or raised, and
the error raised for it is raised after the `except` block that caught the client's error,
never inside it: Python would chain that error as `__context__`, and the request it holds
carries the key in its headers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from firechunk.crawl import DEFAULT_API_URL
from firechunk.crawl.client import CrawlApi, StatusPage, make_api
from firechunk.crawl.download import TERMINAL_STATUSES, PageLog, download_results
from firechunk.crawl.errors import (
    AccessRefusedError,
    CrawlError,
    DownloadError,
    JobFailedError,
    JobNotFoundError,
    MissingApiKeyError,
    PollTimeoutError,
    StartOutcomeUnknownError,
    TargetMismatchError,
)
from firechunk.crawl.failures import NETWORK_KINDS, advice, failure_kind
from firechunk.crawl.jobstate import (
    CrawlPaths,
    check_safe_name,
    crawl_lock,
    default_name,
    is_job_id,
    load_state,
    save_state,
)
from firechunk.crawl.retry import (
    ACCESS_REFUSED_STATUS,
    RetryPolicy,
    describe,
    is_transient,
    never_reached_firecrawl,
    retrying,
    status_of,
    worth_resending_start,
)
from firechunk.crawlfile import write_crawl
from firechunk.schemas.job import ApiVersion, CrawlJobState, CrawlTarget
from firechunk.schemas.page import CrawledPage, CrawlResult

log = logging.getLogger(__name__)

T = TypeVar("T")
Report = Callable[[str], None]


@dataclass(frozen=True)
class ClientOptions:
    """How to talk to Firecrawl. The defaults suit the real API; tests shrink the waits."""

    api_version: ApiVersion = "v2"
    api_url: str = DEFAULT_API_URL
    poll_interval: float = 2.0
    max_poll_interval: float = 30.0
    poll_backoff: float = 1.5
    max_wait: float | None = None  # seconds a job may run before we stop waiting (state kept)
    request_timeout: float = 60.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)


@dataclass(frozen=True)
class CrawlOutcome:
    name: str
    job_id: str
    state_file: Path
    pages_file: Path
    crawl_file: Path
    pages: int
    replayed: bool


def run_crawl(
    target: CrawlTarget,
    *,
    api_key: str | None,
    data_dir: Path,
    settings: ClientOptions | None = None,
    name: str | None = None,
    recrawl: bool = False,
    report: Report = log.info,
) -> CrawlOutcome:
    """Crawl `target` (or resume its job, or replay it when it is already complete)."""
    crawl_name = check_safe_name(name or default_name(target), "crawl name")
    paths = CrawlPaths(Path(data_dir))
    with crawl_lock(paths.lock_file(crawl_name)):
        run = _CrawlRun(crawl_name, target, settings or ClientOptions(), paths, api_key, report)
        return run.run(recrawl)


def needs_api_key(
    target: CrawlTarget, data_dir: Path, name: str | None = None, recrawl: bool = False
) -> bool:
    """Whether `run_crawl` would call Firecrawl, and so need a key: a new job, or one not
    yet downloaded. A downloaded crawl replays from disk; one that failed, expired or got
    no answer to its start call is reported without a key."""
    if recrawl:
        return True
    crawl_name = check_safe_name(name or default_name(target), "crawl name")
    saved = load_state(CrawlPaths(Path(data_dir)).state_file(crawl_name))
    return saved is None or saved.status in ("polling", "downloading")


class _CrawlRun:
    def __init__(
        self,
        name: str,
        target: CrawlTarget,
        settings: ClientOptions,
        paths: CrawlPaths,
        api_key: str | None,
        report: Report,
    ) -> None:
        self.name = name
        self.target = target
        self.settings = settings
        self.api_url = settings.api_url.rstrip("/")
        self.paths = paths
        self.state_file = paths.state_file(name)
        self._api_key = api_key
        self.report = report

    # -- the whole run -------------------------------------------------------------------

    def run(self, recrawl: bool) -> CrawlOutcome:
        saved = load_state(self.state_file)
        if saved is not None and not recrawl:
            self._check_same_crawl(saved)
            if saved.status in ("done", "downloaded"):
                return self._finish(saved)  # offline: no key, no network
            if saved.status in ("failed", "expired"):
                raise _error_for_final(saved)
            if saved.status == "starting":
                raise StartOutcomeUnknownError(
                    f"{saved.error or 'a previous start call got no answer'}. "
                    f"{_START_UNKNOWN_ADVICE}"
                )
            api = self._api(self.settings.api_version, self.api_url)
            self.report(f"resuming Firecrawl job {saved.job_id} ({saved.status})")
            state = saved
        else:
            api = self._api(self.settings.api_version, self.api_url)
            if saved is not None:
                self._cancel_if_running(saved)
            state = self._start(api, replacing=saved)
        self._follow(api, state)
        return self._finish(state)

    def _follow(self, api: CrawlApi, state: CrawlJobState) -> None:
        """Poll the job to its end and download its results, keeping the state on any error."""
        try:
            return self._poll_and_download(api, state)
        except CrawlError as error:
            state.error = str(error)
            self._save(state)
            raise
        except Exception as error:
            failure = self._call_failure(state, error)
        raise failure  # outside the `except`: see the module's docstring

    def _poll_and_download(self, api: CrawlApi, state: CrawlJobState) -> None:
        last = self._poll(api, state) if state.status == "polling" else None
        if state.status == "downloading":
            download_results(
                state,
                PageLog(self.paths.pages_file(_job_id(state))),
                fetch_first=lambda: self._call("result page", api.first_page, _job_id(state)),
                fetch_next=lambda cursor: self._call("result page", api.next_page, cursor),
                save=self._save,
                report=self.report,
                first_page=last,
            )

    def _call_failure(self, state: CrawlJobState, error: Exception) -> CrawlError:
        """The error to raise for a failed poll or download call, after saving the state."""
        if status_of(error) == 404:
            state.status = "expired"
            state.error = _expired_message(state, self.paths)
            self._save(state)
            return JobNotFoundError(state.error)
        state.error = self._describe(error)
        self._save(state)
        tip = advice(failure_kind(error, status_of(error)), status_of(error))
        return _error_for_status(status_of(error))(
            f"Firecrawl job {state.job_id}: {state.error}{'; ' + tip if tip else ''}. "
            f"The job state is kept in "
            f"{self.state_file} ({state.pages_saved} pages saved); run again to resume."
        )

    # -- steps ---------------------------------------------------------------------------

    def _start(self, api: CrawlApi, replacing: CrawlJobState | None) -> CrawlJobState:
        """Start a new job; its id is on disk the moment the start call returns."""
        state = CrawlJobState(
            name=self.name,
            api_version=self.settings.api_version,
            api_url=self.api_url,
            target=self.target,
        )
        self._save(state)  # status "starting": a death during the call is seen on rerun
        job_id = self._start_call(api, state, replacing)
        if not is_job_id(job_id):
            raise CrawlError(
                "Firecrawl's answer to the start call holds no usable job id (letters, digits, "
                "_ and -, as in a UUID): it would name a folder under data/raw"
            )
        state.job_id = job_id
        state.status = "polling"
        self._save(state)
        self.report(f"started Firecrawl job {job_id} for {self.target.url} (crawl {self.name})")
        return state

    def _start_call(
        self, api: CrawlApi, state: CrawlJobState, replacing: CrawlJobState | None
    ) -> str:
        """The new job's id; on failure, the state is put right and a CrawlError raised."""
        try:
            return self._call(
                "start call", api.start, self.target, should_retry=worth_resending_start
            )
        except Exception as error:
            failure = self._start_failure(state, replacing, error)
        raise failure  # outside the `except`: see the module's docstring

    def _start_failure(
        self, state: CrawlJobState, replacing: CrawlJobState | None, error: Exception
    ) -> CrawlError:
        """The error to raise for a failed start call, after putting the state right."""
        status = status_of(error)
        if never_reached_firecrawl(error) or (status is not None and 400 <= status < 500):
            # Refused outright: no job exists, so the next run may simply start again.
            if replacing is not None:
                self._save(replacing)
            else:
                self.state_file.unlink(missing_ok=True)
            return _error_for_status(status)(self._not_started(error, status))
        state.error = f"the start call ended with {self._describe(error)}"
        self._save(state)
        return StartOutcomeUnknownError(f"{state.error}. {_START_UNKNOWN_ADVICE}")

    def _poll(self, api: CrawlApi, state: CrawlJobState) -> StatusPage:
        """Wait for the job to end, with growing intervals; return its last status answer."""
        interval = self.settings.poll_interval
        deadline = (
            None if self.settings.max_wait is None else time.monotonic() + self.settings.max_wait
        )
        while True:
            page = self._call("status poll", api.first_page, _job_id(state))
            state.firecrawl_status = page.status
            state.completed, state.total = page.completed, page.total
            state.credits_used = page.credits_used
            self.report(
                f"{page.status}: {page.completed}/{page.total} pages, "
                f"{page.credits_used} credits used"
            )
            if page.status in TERMINAL_STATUSES:
                state.status = "downloading"
                self._save(state)
                return page
            self._save(state)
            if deadline is not None and time.monotonic() > deadline:
                raise PollTimeoutError(
                    f"Firecrawl job {state.job_id} still '{page.status}' after "
                    f"{self.settings.max_wait:.0f} s; run again to go on waiting"
                )
            time.sleep(interval)
            interval = min(interval * self.settings.poll_backoff, self.settings.max_poll_interval)

    def _finish(self, state: CrawlJobState) -> CrawlOutcome:
        """Check the saved pages and write crawl.json; needs no network, so replays run here."""
        job_id = _job_id(state)
        crawl_file = self.paths.crawl_file(job_id)
        pages_file = self.paths.pages_file(job_id)
        replay = state.status == "done"
        if replay and crawl_file.is_file():
            self.report(f"crawl {self.name} is complete: {crawl_file} (no new Firecrawl job)")
            return self._outcome(state, replayed=True)

        log = PageLog(pages_file)
        found = log.count()
        if state.firecrawl_status != "completed":
            state.status = "failed"
            state.error = (
                f"Firecrawl job {job_id} ended '{state.firecrawl_status}' after "
                f"{state.completed}/{state.total} pages; the {found} pages it returned "
                f"are kept in {pages_file}; no crawl.json was written. "
                "Run with --recrawl to start a new job."
            )
            self._save(state)
            raise JobFailedError(state.error)
        if found != state.total:
            self._restart_download(state, found=found)
        crawl = CrawlResult(
            status="completed",
            completed=state.completed,
            total=state.total,
            credits_used=state.credits_used,
        )
        pages = (CrawledPage.model_validate(page) for page in log.pages())
        write_crawl(crawl_file, crawl, pages)
        state.status, state.error = "done", None
        self._save(state)
        self.report(f"crawl {self.name}: {found} pages written to {crawl_file}")
        return self._outcome(state, replayed=replay)

    def _restart_download(self, state: CrawlJobState, found: int) -> None:
        """A short (or long) download: start it over from the first result page next time."""
        state.status = "downloading"
        state.cursor, state.pages_saved, state.saved_bytes = None, 0, 0
        state.error = (
            f"the result pages of job {state.job_id} held {found} pages but Firecrawl reported "
            f"{state.total}; run again to download them afresh (same job, no new credits)"
        )
        self._save(state)
        raise DownloadError(state.error)

    def _cancel_if_running(self, old: CrawlJobState) -> None:
        """--recrawl: stop the job it replaces if that one may still spend credits.

        Only at the API URL the key was given for: the old job's URL comes from its state
        file, which may have been edited to send the key to another host.
        """
        if old.job_id is None or old.status != "polling":
            return
        if old.api_url != self.api_url:
            self.report(
                f"the job it replaces, {old.job_id}, is not cancelled: it was started at "
                f"{old.api_url} and the key is for {self.api_url}; cancel it there if it runs"
            )
            return
        try:
            api = self._api(old.api_version, self.api_url)
            self._call("cancel call", api.cancel, old.job_id)
            self.report(f"cancelled the job it replaces, {old.job_id}")
        except Exception as error:
            self.report(f"could not cancel the replaced job {old.job_id}: {self._describe(error)}")

    # -- helpers -------------------------------------------------------------------------

    def _api(self, version: ApiVersion, api_url: str) -> CrawlApi:
        if not self._api_key:
            raise MissingApiKeyError(
                "no Firecrawl API key: set FIRECRAWL_API_KEY to start or resume a crawl "
                "(a complete crawl replays without one)"
            )
        return make_api(version, self._api_key, api_url, self.settings.request_timeout)

    def _call(
        self,
        what: str,
        function: Callable[..., T],
        *args: Any,
        should_retry: Callable[[BaseException], bool] = is_transient,
    ) -> T:
        """Call Firecrawl under the retry policy; `what` names the call in retry reports."""
        policy = retrying(self.settings.retry, should_retry, self.report, what, self._api_key)
        return policy(function, *args)

    def _describe(self, error: BaseException) -> str:
        return describe(error, self._api_key, self.settings.request_timeout)

    def _not_started(self, error: BaseException, status: int | None) -> str:
        """Why no job was started: Firecrawl not reached (and how), or its refusal."""
        kind = failure_kind(error, status)
        if kind in NETWORK_KINDS:
            head = f"could not reach Firecrawl at {_origin(self.api_url)} to start the crawl"
        else:
            head = "Firecrawl refused to start the crawl"
        tip = advice(kind, status)
        return f"{head}: {self._describe(error)}" + (f"; {tip}" if tip else "")

    def _save(self, state: CrawlJobState) -> None:
        save_state(self.state_file, state)

    def _check_same_crawl(self, saved: CrawlJobState) -> None:
        wanted = (self.target, self.settings.api_version, self.api_url)
        found = (saved.target, saved.api_version, saved.api_url)
        if wanted != found:
            raise TargetMismatchError(
                f"crawl {self.name} already has job {saved.job_id} for {saved.target.url} "
                f"({saved.api_version} at {saved.api_url}, options "
                f"{saved.target.model_dump(exclude={'url'})}); use --recrawl to replace it or "
                "--name to keep both"
            )

    def _outcome(self, state: CrawlJobState, replayed: bool) -> CrawlOutcome:
        job_id = _job_id(state)
        return CrawlOutcome(
            name=self.name,
            job_id=job_id,
            state_file=self.state_file,
            pages_file=self.paths.pages_file(job_id),
            crawl_file=self.paths.crawl_file(job_id),
            pages=state.pages_saved,
            replayed=replayed,
        )


_START_UNKNOWN_ADVICE = (
    "Firecrawl may or may not have created a job (and may be spending credits on it); "
    "check the active crawls of your account, then run with --recrawl to start a new job"
)


def _error_for_status(status: int | None) -> type[CrawlError]:
    """The error a failed call raises: one no rerun gets past when Firecrawl refused the
    key or the account (the flow's crawl task is not retried for it, `tasks.stages`)."""
    return AccessRefusedError if status in ACCESS_REFUSED_STATUS else CrawlError


def _origin(url: str) -> str:
    """scheme://host[:port] of an API URL: what a message may show of it (never a user or
    password written into the URL)."""
    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "the API URL"
    return f"{parts.scheme}://{parts.hostname}{port}" if parts.hostname else "the API URL"


def _job_id(state: CrawlJobState) -> str:
    if state.job_id is None:
        raise CrawlError(f"crawl {state.name} has no Firecrawl job id yet")
    return state.job_id


def _expired_message(state: CrawlJobState, paths: CrawlPaths) -> str:
    return (
        f"Firecrawl no longer knows job {state.job_id} (HTTP 404): crawl results expire "
        f"24 h after the job ends. The {state.pages_saved} pages saved so far are kept in "
        f"{paths.pages_file(_job_id(state))}. Run with --recrawl to start a new job."
    )


def _error_for_final(state: CrawlJobState) -> CrawlError:
    error_class = JobNotFoundError if state.status == "expired" else JobFailedError
    return error_class(state.error or f"Firecrawl job {state.job_id} ended {state.status}")
