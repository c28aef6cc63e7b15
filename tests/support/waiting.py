import time


def wait_until(predicate, timeout=30.0, message="condition", interval=0.2):
    """Poll `predicate` until it returns something truthy (and return that), or fail the test."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")
