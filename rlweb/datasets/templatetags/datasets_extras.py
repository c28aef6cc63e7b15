from django import template

register = template.Library()


@register.simple_tag
def percent(done, total) -> int:
    """Whole percent of done/total, 0 when the total is not known yet."""
    try:
        return max(0, min(100, int(100 * done / total))) if total else 0
    except (TypeError, ValueError):
        return 0


@register.filter
def fields_named(form, names: str):
    """The bound fields of `form` named in the space-separated `names`, in that order."""
    return [form[name] for name in names.split() if name in form.fields]
