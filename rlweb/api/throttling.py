"""Throttles. Every authenticated call counts against the user's rate (settings
REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["user"]); actions that start work on the server
(launching a run, importing a dataset, a judger dry run) also count against a smaller rate."""

from django.conf import settings
from rest_framework.throttling import UserRateThrottle

from rlweb.env import env_str


class UserThrottle(UserRateThrottle):
    # The default rate, read when a request is throttled (not at import) so tests can change it.
    def get_rate(self):
        return settings.REST_FRAMEWORK.get("DEFAULT_THROTTLE_RATES", {}).get("user", "6000/min")


class HeavyActionThrottle(UserRateThrottle):
    scope = "heavy"

    def get_rate(self):
        rates = settings.REST_FRAMEWORK.get("DEFAULT_THROTTLE_RATES", {})
        return rates.get("heavy") or env_str("API_THROTTLE_HEAVY", "120/min")
