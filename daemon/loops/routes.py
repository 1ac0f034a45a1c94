"""Routes: follow the tenant route table (``gochatd migrate``) so that every daemon serves
a moved tenant from its new database within ``REFRESH_S``, and acknowledge each version:
the migrator's barrier waits until every live daemon has (docs/migrate.md).

The acknowledgement is repeated every ``ACK_EVERY_S`` even without a change, which is what
tells the migrator this daemon is alive (it counts acks younger than 15 s)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from gochatd.errors import StoreUnavailable

if TYPE_CHECKING:
    from gochatd.service import Worker

REFRESH_S = 0.5
ACK_EVERY_S = 5.0


async def routes_loop(worker: Worker) -> None:
    acked: int | None = None
    acked_at = -ACK_EVERY_S
    while True:
        try:
            version = (await worker.store.refresh_routes()).version
            if version != acked or trio.current_time() - acked_at >= ACK_EVERY_S:
                # Acked only after the destinations it names were opened (refresh raises
                # otherwise): a daemon that cannot reach a destination holds the barrier.
                await worker.store.ack_routes(worker.worker_id, version)
                if version != acked:
                    worker.intake_wakeup.set()
                acked, acked_at = version, trio.current_time()
        except StoreUnavailable as exc:
            worker.transient_error("routes", exc)
        await trio.sleep(REFRESH_S)


async def forget_ack(worker: Worker) -> None:
    await worker.store.forget_route_ack(worker.worker_id)
