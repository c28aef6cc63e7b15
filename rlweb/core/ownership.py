"""Who may see and change what: one owner per object, staff see everything.

Other users' objects answer 404, not 403, so that ids do not reveal what exists.
"""

from django.conf import settings
from django.db import models
from django.http import Http404


class OwnedQuerySet(models.QuerySet):
    def visible_to(self, user):
        if not user.is_authenticated:
            return self.none()
        if user.is_staff:
            return self
        return self.filter(owner=user)


class Owned(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    objects = OwnedQuerySet.as_manager()

    class Meta:
        abstract = True

    def is_visible_to(self, user) -> bool:
        return bool(user.is_authenticated and (user.is_staff or self.owner_id == user.pk))


def get_visible_or_404(model, user, **lookup):
    """The object if `user` may see it, else 404 (whether it exists or not)."""
    try:
        return model.objects.visible_to(user).get(**lookup)
    except (model.DoesNotExist, ValueError, TypeError):
        raise Http404(f"No {model._meta.verbose_name} matches the given query.") from None
