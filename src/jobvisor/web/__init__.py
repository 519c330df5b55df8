"""jobvisor's dashboard: see and steer the fleet from a browser.

    app = jobvisor.web.app(queue, admin_token=os.environ.get("JOBVISOR_ADMIN_TOKEN"))

returns an ASGI application over an `AsyncQueue`, to mount in a Starlette
or FastAPI application or to serve alone (`jobvisor web`); the supervisor
serves it beside its probes when `JOBVISOR_DASHBOARD` is on."""

from ..config import admin_token as admin_token_from_env
from .app import app

__all__ = ["admin_token_from_env", "app"]
