"""Small formatting filters of the run pages."""

from datetime import timedelta

from django import template

register = template.Library()


@register.filter
def duration(value):
    """timedelta -> '1h 02m', '3m 05s', '42s' (— for none)."""
    if not isinstance(value, timedelta):
        return "—"
    total = int(value.total_seconds())
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {seconds:02d}s"
    return f"{seconds}s"


@register.filter
def percent(value):
    try:
        return f"{100 * float(value):.0f}"
    except (TypeError, ValueError):
        return "0"


@register.filter
def filesize(value):
    try:
        size = float(value)
    except (TypeError, ValueError):
        return "—"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


@register.filter
def dotted(name):
    """A launch-form field name back to its config path: rollout__n -> rollout.n."""
    return str(name).replace("__", ".")
