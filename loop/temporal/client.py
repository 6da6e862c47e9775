"""Talking to the Temporal server: connect (with mTLS when asked), start or attach to a loop's
workflow, send a person's command as a signal, read the loop with a query, list the loops.

The verbs are short-lived processes: each call here runs its own event loop (`call`). The SDK's
native runtime can abort at interpreter exit after the work is done (a known issue of the SDK);
`loop.cli.main` leaves with `os._exit` (its output flushed) whenever a verb loaded the SDK.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from temporalio.client import Client, TLSConfig, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError

from loop.core.errors import LoopdeckError
from loop.core.timeutil import iso_s, utcnow
from loop.temporal import protocol
from loop.temporal.protocol import CommandSignal, LoopSpec

T = TypeVar("T")
CONNECT_TIMEOUT = timedelta(seconds=10)


@dataclass(frozen=True)
class Target:
    """Where the loops are: the server, its namespace, the task queue, and the files of this
    machine's client certificate (never their contents: those stay on the machine)."""

    address: str
    namespace: str = "default"
    task_queue: str = "loopdeck"
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Target:
        known = {k: str(v) for k, v in obj.items() if k in cls.__dataclass_fields__ and v is not None}
        if "address" not in known:
            raise LoopdeckError("the loop's Temporal record names no address")
        return cls(**known)


def tls_config(target: Target) -> TLSConfig | None:
    """mTLS from files: the client certificate and key (both, or neither), and the CA that
    signed the server's certificate (a self-run server); a hosted namespace needs only the pair."""
    if bool(target.tls_cert) != bool(target.tls_key):
        raise LoopdeckError("--tls-cert and --tls-key go together (the client certificate and its key)")
    if not (target.tls_cert or target.tls_ca):
        return None

    def read(path: str | None, what: str) -> bytes | None:
        if not path:
            return None
        try:
            return Path(path).expanduser().read_bytes()
        except OSError as exc:
            raise LoopdeckError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None

    return TLSConfig(
        server_root_ca_cert=read(target.tls_ca, "CA certificate (--tls-ca)"),
        client_cert=read(target.tls_cert, "client certificate (--tls-cert)"),
        client_private_key=read(target.tls_key, "client key (--tls-key)"),
    )


async def connect(target: Target) -> Client:
    try:
        return await Client.connect(
            target.address,
            namespace=target.namespace,
            tls=tls_config(target) or False,
            connect_timeout=CONNECT_TIMEOUT,
        )
    except RuntimeError as exc:  # the SDK says "Failed client connect: …"
        raise LoopdeckError(
            f"cannot reach the Temporal server at {target.address} (namespace {target.namespace}): "
            f"{_short(exc)}; expected a running server (`loopdeck temporal dev` starts one here)"
        ) from None


def call(work: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(_call(work))


async def _call(work: Callable[[], Awaitable[T]]) -> T:
    try:
        return await work()
    except RPCError as exc:
        raise LoopdeckError(f"the Temporal server refused: {_short(exc)}") from None


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


# --- a loop --------------------------------------------------------------------------------


async def running(client: Client, workflow_id: str) -> bool:
    """Whether the loop `workflow_id` runs on the server now (an ended or unknown one: no)."""
    try:
        described = await client.get_workflow_handle(workflow_id).describe()
    except RPCError:
        return False
    return bool(described.status == WorkflowExecutionStatus.RUNNING)


async def start(client: Client, target: Target, spec: LoopSpec) -> tuple[WorkflowHandle[Any, Any], bool]:
    """Start the loop's workflow, or attach to it when it runs already (same id): (handle,
    started)."""
    handle = client.get_workflow_handle(spec.workflow_id)
    try:
        described = await handle.describe()
        if described.status == WorkflowExecutionStatus.RUNNING:
            return handle, False
    except RPCError:
        pass
    handle = await client.start_workflow(
        protocol.WORKFLOW_NAME,
        spec,
        id=spec.workflow_id,
        task_queue=target.task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        static_summary=f"loopdeck: {spec.loop_name} on {spec.loop_branch}",
    )
    return handle, True


def command(
    kind: str, source: str, reason: str | None = None, value: int | None = None, target: str | None = None
) -> CommandSignal:
    """A person's command as a signal. Its text is redacted first, as the control queue's is:
    a signal stays in the workflow's history, and a token a person pastes belongs elsewhere."""
    from loop.core.redact import redact

    return CommandSignal(
        id=uuid.uuid4().hex[:12],
        ts=iso_s(utcnow()),
        kind=kind,
        source=source,
        reason=redact(reason) if reason else reason,
        value=value,
        target=target,
    )


async def send(client: Client, workflow_id: str, signal: CommandSignal) -> None:
    await client.get_workflow_handle(workflow_id).signal("command", signal)


async def read(client: Client, workflow_id: str, since: int = 0) -> dict[str, Any]:
    """The loop's snapshot query; a loop that has ended answers from its last state."""
    handle = client.get_workflow_handle(workflow_id)
    try:
        described = await handle.describe()
    except RPCError as exc:
        raise LoopdeckError(f"no loop {workflow_id} on the Temporal server: {_short(exc)}") from None
    if described.status != WorkflowExecutionStatus.RUNNING:
        final = await _final(handle)  # an ended loop is read from its result: no worker needed
        if final is not None:
            return final
    try:
        answer = await handle.query("snapshot", since)
    except RPCError as exc:
        raise LoopdeckError(f"the loop {workflow_id} did not answer: {_short(exc)}") from None
    return dict(answer) if isinstance(answer, dict) else {}


async def outputs(client: Client, workflow_id: str) -> list[Any]:
    """The last heartbeat of each turn under way: its agent's last lines, as the worker sent
    them (`loop.temporal.output`). Read from the server's record of the pending activities: the
    workflow's history never holds them."""
    try:
        described = await client.get_workflow_handle(workflow_id).describe()
    except RPCError:
        return []
    found: list[Any] = []
    for pending in described.raw_description.pending_activities:
        if pending.activity_type.name != "loopdeck.turn" or not pending.HasField("heartbeat_details"):
            continue
        try:
            found.extend(await client.data_converter.decode(pending.heartbeat_details.payloads))
        except Exception:  # a detail this version cannot read (another worker's): not shown
            continue
    return found


async def _final(handle: WorkflowHandle[Any, Any]) -> dict[str, Any] | None:
    """The last picture an ended loop's result holds (its state, its journal's tail)."""
    try:
        result = await handle.result()
    except Exception:  # failed or terminated: nothing kept
        return None
    final = result.get("final") if isinstance(result, dict) else None
    return dict(final) if isinstance(final, dict) else None


async def loops(client: Client, limit: int = 50) -> list[dict[str, Any]]:
    """The loops on the server, newest first: id, status, start."""
    found = []
    query = f"WorkflowType = '{protocol.WORKFLOW_NAME}'"
    async for execution in client.list_workflows(query, limit=limit):
        found.append(
            {
                "workflow_id": execution.id,
                "status": execution.status.name.lower() if execution.status else "unknown",
                "started": iso_s(execution.start_time) if execution.start_time else None,
                "closed": iso_s(execution.close_time) if execution.close_time else None,
            }
        )
    return found


# --- the workspace's record of its loop -------------------------------------------------------

RECORD = "temporal.json"


def record_path(private_dir: Path) -> Path:
    return private_dir / RECORD


def save(private_dir: Path, target: Target, workflow_id: str, started_at: str) -> None:
    from loop.store.safeopen import write_bytes

    obj = {**target.to_json(), "workflow_id": workflow_id, "started_at": started_at}
    write_bytes(record_path(private_dir), (json.dumps(obj, indent=2) + "\n").encode())


def load(private_dir: Path) -> dict[str, Any] | None:
    from loop.store.safeopen import read_regular

    try:
        obj = json.loads(read_regular(record_path(private_dir), 64 * 1024))
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) and obj.get("workflow_id") and obj.get("address") else None


class Remote:
    """One connection kept for a long-lived viewer (the monitor): its own event loop on a
    thread, so the monitor's threads ask the server without connecting every time."""

    def __init__(self, target: Target) -> None:
        import threading

        self.target = target
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="loopdeck-temporal", daemon=True)
        self.thread.start()
        self.client: Client | None = None

    def run(self, work: Callable[[Client], Awaitable[T]], timeout: float = 15.0) -> T:
        async def go() -> T:
            if self.client is None:
                self.client = await connect(self.target)
            try:
                return await work(self.client)
            except RPCError as exc:
                raise LoopdeckError(f"the Temporal server refused: {_short(exc)}") from None

        return asyncio.run_coroutine_threadsafe(go(), self.loop).result(timeout)

    def read(self, workflow_id: str) -> dict[str, Any]:
        return self.run(lambda client: read(client, workflow_id))

    def outputs(self, workflow_id: str) -> list[Any]:
        return self.run(lambda client: outputs(client, workflow_id))

    def send(self, workflow_id: str, signal: CommandSignal) -> None:
        self.run(lambda client: send(client, workflow_id, signal))

    def loops(self, limit: int = 50) -> list[dict[str, Any]]:
        return self.run(lambda client: loops(client, limit))

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
