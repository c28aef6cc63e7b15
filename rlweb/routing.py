"""WebSocket routes of every app, gathered for the ASGI router."""

from rlweb.runs.routing import websocket_urlpatterns as runs_ws

websocket_urlpatterns = [*runs_ws]
